//! Keeping many simulated Nodes registered from one task: every 10 s, each node's Lease is
//! renewed and its status posted when due (see `node::StatusReporter`), a bounded number of
//! nodes at a time. A node whose registration or heartbeat failed is retried at the next
//! round, which then comes sooner (backoff from 200 ms).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use setpoint_runtime::{Client, ObjectCache, ObjectKey};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::node::{
    register, retry_delay, NodeLease, NodeReadiness, NodeRegistration, StatusReporter,
    LEASE_NAMESPACE, RENEW_INTERVAL,
};

/// Nodes whose heartbeats run at once.
const CONCURRENT_HEARTBEATS: usize = 16;

/// One simulated node's registration state.
#[derive(Debug)]
struct Kept {
    reg: NodeRegistration,
    lease: NodeLease,
    reporter: StatusReporter,
    /// Whether the Node was created or adopted since the last time it was found missing.
    registered: bool,
}

/// What one round shares.
struct Apis<'a> {
    nodes: &'a Api<Node>,
    leases: &'a Api<Lease>,
    /// The simulated Nodes as the API has them (a label-selected informer's store).
    cache: &'a ObjectCache<Node>,
}

/// Registers every node of `regs` once (the first round) and keeps them until `shutdown`;
/// `first_round_done` is cancelled after the first round, whatever its outcome.
pub(super) async fn keep_nodes(
    client: Client,
    regs: Vec<NodeRegistration>,
    cache: ObjectCache<Node>,
    first_round_done: CancellationToken,
    shutdown: CancellationToken,
) {
    let nodes: Api<Node> = client.api();
    let leases: Api<Lease> = client.namespaced_api(LEASE_NAMESPACE);
    let apis = Apis {
        nodes: &nodes,
        leases: &leases,
        cache: &cache,
    };
    let mut kept: Vec<Kept> = regs
        .into_iter()
        .map(|reg| Kept {
            lease: NodeLease::new(&reg.name),
            reg,
            reporter: StatusReporter::new(),
            registered: false,
        })
        .collect();
    let mut failures = 0u32;
    loop {
        let started = Instant::now();
        let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        futures::stream::iter(kept.iter_mut())
            .for_each_concurrent(CONCURRENT_HEARTBEATS, |k| {
                let failed = failed.clone();
                let apis = &apis;
                async move {
                    if !heartbeat(apis, k).await {
                        failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            })
            .await;
        first_round_done.cancel();
        let failed = failed.load(std::sync::atomic::Ordering::Relaxed);
        let next = if failed == 0 {
            failures = 0;
            started + RENEW_INTERVAL
        } else {
            failures += 1;
            tracing::warn!(failed, "simulated node heartbeats failed; retrying");
            Instant::now() + retry_delay(failures)
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep_until(next) => {}
        }
    }
}

/// One node's heartbeat: register if needed, renew the Lease, post status if due. Returns
/// whether everything succeeded.
async fn heartbeat(apis: &Apis<'_>, k: &mut Kept) -> bool {
    let cached = apis.cache.get(&ObjectKey {
        namespace: None,
        name: k.reg.name.clone(),
    });
    let current = match (&cached, k.registered) {
        (Some(node), true) => Node::clone(node),
        // Not registered yet, or the Node is gone from the cache: (re)register.
        _ => match register(apis.nodes, &k.reg).await {
            Ok(node) => {
                k.lease.set_owner(&node);
                k.reporter = StatusReporter::new();
                k.registered = true;
                node
            }
            Err(error) => {
                tracing::warn!(node = %k.reg.name, %error, "registering a simulated node failed");
                return false;
            }
        },
    };
    let mut ok = true;
    if let Err(error) = k.lease.renew(apis.leases).await {
        tracing::debug!(node = %k.reg.name, %error, "renewing a simulated node's lease failed");
        ok = false;
    }
    if k.reporter
        .due(&current, &k.reg, &NodeReadiness::Ready, Instant::now())
    {
        if let Err(error) = k
            .reporter
            .post(apis.nodes, Some(&current), &k.reg, &NodeReadiness::Ready)
            .await
        {
            tracing::debug!(node = %k.reg.name, %error, "posting a simulated node's status failed");
            ok = false;
        }
    }
    ok
}
