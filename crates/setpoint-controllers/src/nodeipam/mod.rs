//! The node IPAM loop (kube-controller-manager's `node-ipam-controller` with its range
//! allocator): gives each Node a pod range, `spec.podCIDR` and `spec.podCIDRs`, cut from the
//! cluster CIDR (`--cluster-cidr`, default `10.244.0.0/16`) in blocks of
//! `--node-cidr-mask-size` (default `/24`).
//!
//! Level-triggered, with no state of its own to lose: the ranges in use are those the Nodes in
//! the cache carry, plus the ones this loop has just written and the cache has not shown yet
//! (`pending`, so one range is never handed out twice while the cache lags). A restarted loop
//! therefore keeps every existing assignment; a deleted Node's range is free again as soon as
//! the Node is gone from the cache. A Node gets the lowest free range. When none is free the
//! Node gets a `CIDRNotAvailable` event (as kube records it) and is tried again periodically.
//! A range once set is never changed (the API treats `podCIDR` as immutable).

mod allocate;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use parking_lot::Mutex;
use setpoint_core::cidr::Ipv4Cidr;
use setpoint_runtime::{
    Action, Client, Controller, ControllerError, EventDetails, EventRecorder, ObjectCache, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;

/// The controller's name, as kube-controller-manager names it.
const NAME: &str = "node-ipam-controller";
/// How soon a Node waiting for a free range is tried again.
const EXHAUSTED_RETRY: Duration = Duration::from_secs(5);

/// Why a sync failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum IpamError {
    /// Writing the Node's range failed.
    #[error("assigning {cidr} to node {node}")]
    Assign {
        /// The Node.
        node: String,
        /// The range.
        cidr: Ipv4Cidr,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

struct Context {
    client: Client,
    nodes: ObjectCache<Node>,
    cluster: Ipv4Cidr,
    mask: u8,
    /// Ranges written but not yet seen in the cache, by Node name.
    pending: Mutex<BTreeMap<String, Ipv4Cidr>>,
    /// Nodes already told their range is unavailable (one event per wait).
    told: Mutex<std::collections::BTreeSet<String>>,
    recorder: EventRecorder,
}

/// Runs the loop until `shutdown` is cancelled; does nothing (but wait) without a cluster
/// CIDR.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let Some(cluster) = ctx.settings.cluster_cidr else {
        tracing::info!("no cluster CIDR: nodes get no pod ranges");
        shutdown.cancelled().await;
        return Ok(());
    };
    let mask = ctx.settings.node_cidr_mask_size;
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        nodes: ctx.factory.informer::<Node>().store(),
        cluster,
        mask,
        pending: Mutex::default(),
        told: Mutex::default(),
        recorder: EventRecorder::new(ctx.client.clone(), Reporter::new(NAME, "setpoint")),
    });
    Controller::<Node>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(1)
        .run(reconcile, context, shutdown.cancelled_owned())
        .await
}

async fn reconcile(node: Arc<Node>, ctx: Arc<Context>) -> Result<Action, IpamError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    if allocate::assigned(&node).is_some() {
        ctx.pending.lock().remove(&name);
        ctx.told.lock().remove(&name);
        return Ok(Action::await_change());
    }
    if node.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let nodes = ctx.nodes.list();
    let choice = {
        let mut pending = ctx.pending.lock();
        allocate::forget_settled(&mut pending, &nodes);
        match pending.get(&name) {
            Some(cidr) => Some(*cidr),
            None => allocate::lowest_free(ctx.cluster, ctx.mask, &nodes, &pending),
        }
    };
    let Some(cidr) = choice else {
        if ctx.told.lock().insert(name.clone()) {
            tracing::warn!(node = %name, cluster = %ctx.cluster, "no free pod range for the node");
            ctx.recorder.publish_for(
                &*node,
                EventDetails::normal("CIDRNotAvailable", "CIDRAssignmentFailed").with_note(
                    format!(
                        "Node {name} status is now: CIDRNotAvailable (no free /{} left in {})",
                        ctx.mask, ctx.cluster
                    ),
                ),
            );
        }
        return Ok(Action::requeue(EXHAUSTED_RETRY));
    };
    ctx.pending.lock().insert(name.clone(), cidr);
    let patch =
        serde_json::json!({"spec": {"podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()]}});
    let api = ctx.client.api::<Node>();
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(node = %name, %cidr, "assigned a pod range");
            ctx.told.lock().remove(&name);
            Ok(Action::await_change())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            ctx.pending.lock().remove(&name);
            Ok(Action::await_change())
        }
        Err(source) => {
            ctx.pending.lock().remove(&name);
            Err(IpamError::Assign {
                node: name,
                cidr,
                source,
            })
        }
    }
}
