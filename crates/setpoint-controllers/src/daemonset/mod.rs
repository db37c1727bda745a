//! The DaemonSet loop (kube-controller-manager's `daemonset-controller`): one pod on every
//! node that should run it (node selector, required node affinity, taints against the
//! template's tolerations plus the automatic DaemonSet ones), placed by the default scheduler
//! through a required `matchFields metadata.name` term, rolled to new templates through
//! ControllerRevisions (`maxUnavailable`, `maxSurge`, or `OnDelete`).
//!
//! - [`sync`]: one sync — claim pods, the update revision ([`crate::history`]), the writes
//!   ([`plan`]), the status ([`status`]), history truncation.
//! - [`placement`]: the pod made for a node, and whether a node should run or keep one.
//! - [`expectations`]: no second pod on a node while the cache lags the loop's own writes.
//! - [`watch`]: which DaemonSets pod and node events wake.
//!
//! Promises: at most one pod per node and revision once writes are observed (two only while
//! surging); never touches a pod another controller controls; simulated nodes count like
//! real ones. Design: `docs/design/statefulsets-daemonsets.md`.

mod error;
mod expectations;
mod placement;
mod plan;
mod status;
mod sync;
mod watch;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use setpoint_runtime::{
    Client, Controller, ControllerError, EventRecorder, InformerOptions, ObjectCache, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use expectations::Expectations;
use watch::{
    controller_uid_index, daemonsets_for, ForgetDeleted, NodeEvents, PodEvents, BY_CONTROLLER_UID,
};

/// The controller's name, as kube-controller-manager names it (logs, metrics, Events).
const CONTROLLER_NAME: &str = "daemonset-controller";

/// Syncs of different DaemonSets at once (`--concurrent-daemonset-syncs`).
const CONCURRENT_SYNCS: usize = 2;

/// What every sync shares.
pub(super) struct Context {
    /// Where writes go.
    client: Client,
    /// The shared pod cache, with the [`BY_CONTROLLER_UID`] index.
    pods: ObjectCache<Pod>,
    /// The shared node cache.
    nodes: ObjectCache<Node>,
    /// The shared ControllerRevision cache.
    revisions: ObjectCache<ControllerRevision>,
    /// Pod writes not yet observed, by DaemonSet.
    expectations: Arc<Expectations>,
    /// `SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete` Events on DaemonSets.
    recorder: EventRecorder,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let pod_informer = ctx.factory.informer::<Pod>();
    pod_informer.add_index(BY_CONTROLLER_UID, controller_uid_index());
    let expectations = Arc::new(Expectations::default());
    let ds_informer = ctx.factory.informer::<DaemonSet>();
    let forget = ds_informer.add_handler(ForgetDeleted {
        expectations: expectations.clone(),
    });
    let sets = ds_informer.store();
    let context = Arc::new(Context {
        recorder: EventRecorder::new(
            ctx.client.clone(),
            Reporter::new(CONTROLLER_NAME, "setpoint"),
        ),
        client: ctx.client,
        pods: pod_informer.store(),
        nodes: ctx.factory.informer::<Node>().store(),
        revisions: ctx.factory.informer::<ControllerRevision>().store(),
        expectations: expectations.clone(),
    });
    let (pod_sets, node_sets, revision_sets) = (sets.clone(), sets.clone(), sets);
    let result = Controller::<DaemonSet>::new(&ctx.factory)
        .named(CONTROLLER_NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENT_SYNCS)
        .watches_handler(InformerOptions::default(), move |enqueuer| PodEvents {
            expectations,
            sets: pod_sets,
            enqueuer,
        })
        .watches_handler(InformerOptions::default(), move |enqueuer| NodeEvents {
            sets: node_sets,
            enqueuer,
        })
        .watches_with(
            InformerOptions::default(),
            move |revision: &ControllerRevision| daemonsets_for(&revision_sets, &revision.metadata),
        )
        .run(sync::reconcile, context, shutdown.cancelled_owned())
        .await;
    forget.remove();
    result
}
