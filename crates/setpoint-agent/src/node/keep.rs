//! [`keep_registered`]: one node's registration loop — register, then renew the Lease every
//! 10 s and post status when it changed or every 5 minutes, until shutdown.
//!
//! Promises: API errors never end the loop (they are logged and retried with backoff, 200 ms
//! doubling to 10 s); a Node deleted while the agent runs is registered again; a change of
//! readiness is posted at once.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use setpoint_runtime::Client;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::create_or_adopt::register;
use super::lease::{retry_delay, NodeLease, LEASE_NAMESPACE, RENEW_INTERVAL};
use super::status::{NodeReadiness, StatusReporter};
use super::NodeRegistration;

/// Where the loop is.
#[derive(Debug)]
enum State {
    /// Creating or adopting the Node; `failures` attempts failed in a row.
    Registering { failures: u32 },
    /// Registered; the next heartbeat (Lease renewal and status check) is due at `next`.
    /// `failures` heartbeats failed in a row (it then comes sooner, with backoff).
    Registered { next: Instant, failures: u32 },
}

/// Registers `reg` as a Node that is always [`NodeReadiness::Ready`] and keeps it alive until
/// `shutdown` is cancelled; see [`keep_registered_with_readiness`].
pub(crate) async fn keep_registered(
    client: Client,
    reg: NodeRegistration,
    shutdown: CancellationToken,
) {
    let (_ready, readiness) = watch::channel(NodeReadiness::Ready);
    keep_registered_with_readiness(client, reg, readiness, shutdown).await;
}

/// Registers `reg` as a Node and keeps it alive until `shutdown` is cancelled: renews its
/// Lease every 10 s and posts its status (conditions from `readiness`) when it changed, when
/// the API shows something else, or every 5 minutes. Returns only on shutdown.
///
/// Cancel-safe: dropping the future stops the loop; the Node stays and its Lease expires.
// Used by keep_registered; callable directly by an agent that reports NotReady (the real
// agent reports Ready for now).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) async fn keep_registered_with_readiness(
    client: Client,
    reg: NodeRegistration,
    mut readiness: watch::Receiver<NodeReadiness>,
    shutdown: CancellationToken,
) {
    let nodes: Api<Node> = client.api();
    let leases: Api<Lease> = client.namespaced_api(LEASE_NAMESPACE);
    let mut lease = NodeLease::new(&reg.name);
    let mut reporter = StatusReporter::new();
    // Whether readiness can still change (its sender is alive).
    let mut readiness_open = true;
    let mut state = State::Registering { failures: 0 };
    loop {
        state = match state {
            State::Registering { failures } => {
                if failures > 0 {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(retry_delay(failures)) => {}
                    }
                }
                match register(&nodes, &reg).await {
                    Ok(node) => {
                        tracing::info!(node = %reg.name, "node registered");
                        lease.set_owner(&node);
                        reporter = StatusReporter::new();
                        State::Registered {
                            next: Instant::now(),
                            failures: 0,
                        }
                    }
                    Err(error) => {
                        tracing::warn!(node = %reg.name, %error, "registering the node failed; retrying");
                        State::Registering {
                            failures: failures + 1,
                        }
                    }
                }
            }
            State::Registered { next, failures } => {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    changed = readiness.changed(), if readiness_open => {
                        if changed.is_err() {
                            readiness_open = false;
                        }
                        // Post at once: a heartbeat now.
                        State::Registered { next: Instant::now(), failures }
                    }
                    () = tokio::time::sleep_until(next) => {
                        let current = readiness.borrow_and_update().clone();
                        heartbeat(&nodes, &leases, &reg, &mut lease, &mut reporter, &current, failures).await
                    }
                }
            }
        };
    }
}

/// One heartbeat: renew the Lease, then read the Node and post status if due.
async fn heartbeat(
    nodes: &Api<Node>,
    leases: &Api<Lease>,
    reg: &NodeRegistration,
    lease: &mut NodeLease,
    reporter: &mut StatusReporter,
    readiness: &NodeReadiness,
    failures: u32,
) -> State {
    let mut ok = true;
    if let Err(error) = lease.renew(leases).await {
        tracing::warn!(node = %reg.name, %error, "renewing the node lease failed; retrying");
        ok = false;
    }
    match nodes.get_opt(&reg.name).await {
        Ok(None) => {
            tracing::warn!(node = %reg.name, "the Node was deleted; registering it again");
            return State::Registering { failures: 0 };
        }
        Ok(Some(node)) => {
            if reporter.due(&node, reg, readiness, Instant::now()) {
                if let Err(error) = reporter.post(nodes, Some(&node), reg, readiness).await {
                    tracing::warn!(node = %reg.name, %error, "posting node status failed; retrying");
                    ok = false;
                }
            }
        }
        Err(error) => {
            tracing::warn!(node = %reg.name, %error, "reading the Node failed; retrying");
            ok = false;
        }
    }
    if ok {
        State::Registered {
            next: Instant::now() + RENEW_INTERVAL,
            failures: 0,
        }
    } else {
        State::Registered {
            next: Instant::now() + retry_delay(failures + 1),
            failures: failures + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use k8s_openapi::api::core::v1::NodeSystemInfo;
    use kube::api::DeleteParams;
    use setpoint_testenv::{eventually, TestEnv};

    use super::*;

    fn ready_of(node: &Node) -> Option<(String, Option<String>)> {
        node.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| (c.status.clone(), c.reason.clone()))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keep_registered_should_register_lease_report_readiness_and_reregister() {
        let env = TestEnv::start().await.expect("test env");
        let client = env.client();
        let reg = NodeRegistration::new(
            "n1",
            IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)),
            std::collections::BTreeMap::new(),
            NodeSystemInfo {
                operating_system: "linux".to_owned(),
                ..NodeSystemInfo::default()
            },
        )
        .with_daemon_port(10250);
        let (ready_tx, ready_rx) = watch::channel(NodeReadiness::Ready);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(keep_registered_with_readiness(
            client.clone(),
            reg,
            ready_rx,
            shutdown.clone(),
        ));
        let nodes: Api<Node> = client.api();
        let leases: Api<Lease> = client.namespaced_api(LEASE_NAMESPACE);

        let node = eventually("the node registered and Ready", || async {
            let node = nodes.get_opt("n1").await.expect("read node")?;
            (ready_of(&node)?.0 == "True").then_some(node)
        })
        .await;
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("kubernetes.io/hostname").map(String::as_str),
            Some("n1")
        );
        let status = node.status.clone().expect("status");
        let port = status
            .daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map(|e| e.port);
        assert_eq!(port, Some(10250));
        let lease = eventually("the lease", || async {
            leases.get_opt("n1").await.expect("read lease")
        })
        .await;
        let spec = lease.spec.expect("lease spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        let owner = &lease.metadata.owner_references.expect("owner")[0];
        assert_eq!(owner.kind, "Node");
        assert_eq!(Some(&owner.uid), node.metadata.uid.as_ref());

        // Readiness changes are posted at once.
        ready_tx
            .send(NodeReadiness::NotReady {
                reason: "KubeletNotReady".to_owned(),
                message: "runtime down".to_owned(),
            })
            .expect("receiver alive");
        eventually("Ready=False posted", || async {
            let node = nodes.get("n1").await.expect("read node");
            (ready_of(&node)? == ("False".to_owned(), Some("KubeletNotReady".to_owned())))
                .then_some(())
        })
        .await;

        // A deleted Node is registered again (at the next heartbeat, within 10 s).
        ready_tx.send(NodeReadiness::Ready).expect("receiver alive");
        nodes
            .delete("n1", &DeleteParams::default())
            .await
            .expect("delete node");
        let old_uid = node.metadata.uid.clone();
        eventually("the node registered again", || async {
            let node = nodes.get_opt("n1").await.expect("read node")?;
            (node.metadata.uid != old_uid && ready_of(&node)?.0 == "True").then_some(())
        })
        .await;

        shutdown.cancel();
        task.await.expect("loop ends on shutdown");
    }
}
