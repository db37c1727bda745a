//! The node lifecycle loop: kube-controller-manager's `node-lifecycle-controller`,
//! `taint-eviction-controller` and the orphan part of `pod-garbage-collector`, as two
//! controllers over shared caches.
//!
//! - **Nodes** ([`node_sync`]): a node whose Lease (`kube-node-lease/<node>`) and `Ready`
//!   heartbeat have not advanced for `LoopSettings::node_monitor_grace_period` — measured on
//!   this process's clock from when a change was last *seen* ([`health`]), so clock skew does
//!   not matter — gets every condition set `Unknown` (`NodeStatusUnknown`). Its taints then
//!   follow its conditions ([`taints`]): `Ready=Unknown` → `node.kubernetes.io/unreachable`,
//!   `Ready=False` → `node.kubernetes.io/not-ready` (each `NoSchedule` and `NoExecute`, the
//!   latter with `timeAdded`), pressures and `unschedulable` → their `NoSchedule` taints;
//!   removed when the condition clears. Pods on a node that is not `Ready` are marked
//!   `Ready=False`.
//! - **Pods** ([`eviction`]): a bound pod on a node with a `NoExecute` taint it does not
//!   tolerate is deleted; one tolerating it for `tolerationSeconds` is deleted when that runs
//!   out; a pod bound to a node that no longer exists is deleted at once (grace 0).
//!
//! Not done (kube does): eviction rate limits and zone disruption states (kube slows or stops
//! evicting when many nodes of a zone fail at once), the `DisruptionTarget` pod condition,
//! `nodeStartupGracePeriod` for nodes that never posted status (the monitor grace is used),
//! the out-of-service taint.

mod eviction;
mod health;
mod node_sync;
mod taints;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use setpoint_runtime::{
    Client, Controller, ControllerError, Deleted, Enqueuer, EventHandler, EventRecorder,
    InformerOptions, ObjectCache, ObjectKey, Predicate, Reporter, StatusError,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use health::Health;
use taints::NO_EXECUTE;

/// The node controller's name (logs, metrics).
const NODE_CONTROLLER: &str = "node-lifecycle-controller";
/// The pod controller's name (logs, metrics, Events).
const EVICTION_CONTROLLER: &str = "taint-eviction-controller";
/// The namespace of node Leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// Index of the pod cache: pods by `spec.nodeName`.
const BY_NODE: &str = "node-lifecycle/by-node";
/// Nodes reconciled at once.
const NODE_CONCURRENCY: usize = 4;
/// Pods reconciled at once.
const POD_CONCURRENCY: usize = 8;

/// Why a pass over a node or a pod failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(super) enum NodeLifecycleError {
    /// Marking the node `Unknown` failed.
    #[error("marking node {node} Unknown")]
    Status {
        /// The node.
        node: String,
        /// What failed.
        #[source]
        source: StatusError,
    },
    /// Writing the node's taints failed.
    #[error("updating the taints of node {node}")]
    Taints {
        /// The node.
        node: String,
        /// What failed.
        #[source]
        source: kube::Error,
    },
    /// Marking a pod not ready failed.
    #[error("marking pod {pod} not ready")]
    PodStatus {
        /// `namespace/name`.
        pod: String,
        /// What failed.
        #[source]
        source: StatusError,
    },
    /// Reading a node (to confirm it is gone) failed.
    #[error("reading node {node}")]
    ReadNode {
        /// The node.
        node: String,
        /// What failed.
        #[source]
        source: kube::Error,
    },
    /// Deleting a pod failed.
    #[error("deleting pod {pod}")]
    Delete {
        /// `namespace/name`.
        pod: String,
        /// What failed.
        #[source]
        source: kube::Error,
    },
}

/// What both controllers share.
pub(super) struct Context {
    /// Where writes go.
    client: Client,
    /// Every Node.
    nodes: ObjectCache<Node>,
    /// The node Leases.
    leases: ObjectCache<Lease>,
    /// Every pod, with the [`BY_NODE`] index.
    pods: ObjectCache<Pod>,
    /// When each node was last heard from.
    health: Health,
    /// How long a node may be silent.
    grace: Duration,
    /// `TaintManagerEviction` Events on evicted pods.
    recorder: EventRecorder,
}

/// The current wall-clock time, at the second precision a `Time` is stored with.
pub(super) fn time_now() -> Time {
    let secs = chrono::Utc::now().timestamp();
    Time(
        k8s_openapi::jiff::Timestamp::from_second(secs)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let pod_informer = ctx.factory.informer::<Pod>();
    pod_informer.add_index(
        BY_NODE,
        Arc::new(|pod: &Pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .into_iter()
                .collect()
        }),
    );
    let lease_options = InformerOptions::<Lease> {
        namespace: Some(LEASE_NAMESPACE.to_owned()),
        ..InformerOptions::default()
    };
    let context = Arc::new(Context {
        recorder: EventRecorder::new(
            ctx.client.clone(),
            Reporter::new(EVICTION_CONTROLLER, "setpoint"),
        ),
        client: ctx.client.clone(),
        nodes: ctx.factory.informer::<Node>().store(),
        leases: ctx.factory.informer_with(lease_options.clone()).store(),
        pods: pod_informer.store(),
        health: Health::default(),
        grace: ctx.settings.node_monitor_grace_period,
    });

    let nodes = Controller::<Node>::new(&ctx.factory)
        .named(NODE_CONTROLLER)
        .registered_in(&ctx.metrics)
        .concurrency(NODE_CONCURRENCY)
        .watches_with(lease_options, |lease: &Lease| {
            lease.metadata.name.clone().map(|name| ObjectKey {
                namespace: None,
                name,
            })
        })
        .run(
            node_sync::reconcile_node,
            context.clone(),
            shutdown.clone().cancelled_owned(),
        );
    let pods_store = context.pods.clone();
    let pods = Controller::<Pod>::new(&ctx.factory)
        .named(EVICTION_CONTROLLER)
        .registered_in(&ctx.metrics)
        .concurrency(POD_CONCURRENCY)
        .predicate(Predicate::new(|_old: Option<&Pod>, pod: &Pod| {
            pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
        }))
        .watches_handler(InformerOptions::<Node>::default(), move |enqueuer| {
            NodeTaintEvents {
                pods: pods_store,
                enqueuer,
            }
        })
        .run(
            eviction::reconcile_pod,
            context.clone(),
            shutdown.cancelled_owned(),
        );
    let (nodes, pods) = tokio::join!(nodes, pods);
    context.recorder.flush().await;
    nodes.and(pods)
}

/// Enqueues a node's pods when its `NoExecute` taints change, and when it is deleted (its
/// pods are then orphans).
struct NodeTaintEvents {
    pods: ObjectCache<Pod>,
    enqueuer: Enqueuer<ObjectKey>,
}

impl NodeTaintEvents {
    fn enqueue_pods(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        for pod in self.pods.by_index(BY_NODE, name).unwrap_or_default() {
            self.enqueuer.add(ObjectKey::of(pod.as_ref()));
        }
    }
}

/// The node's `NoExecute` taints.
fn no_execute(node: &Node) -> Vec<&Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|ts| ts.iter().filter(|t| t.effect == NO_EXECUTE).collect())
        .unwrap_or_default()
}

impl EventHandler<Node> for NodeTaintEvents {
    fn on_add(&self, node: &Arc<Node>, _in_initial_list: bool) {
        if !no_execute(node).is_empty() {
            self.enqueue_pods(node);
        }
    }

    fn on_update(&self, old: &Arc<Node>, new: &Arc<Node>) {
        if no_execute(old) != no_execute(new) {
            self.enqueue_pods(new);
        }
    }

    fn on_delete(&self, deleted: &Deleted<Node>) {
        self.enqueue_pods(deleted.object());
    }
}
