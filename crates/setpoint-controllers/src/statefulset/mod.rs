//! The StatefulSet loop (kube-controller-manager's `statefulset-controller`): pods with stable
//! names `SET-ORDINAL` (from `spec.ordinals.start`), hostnames under `serviceName`, one claim
//! per `volumeClaimTemplate` each, made and removed in order (`OrderedReady`) or all at once
//! (`Parallel`), rolled to new templates through ControllerRevisions.
//!
//! - [`sync`]: one sync — claim pods, the update revision ([`crate::history`]), a pass over
//!   the pods ([`replicas`]), the status ([`status`]), history truncation.
//! - [`identity`]: ordinals, the pod made for an ordinal, its claims' names.
//! - [`claims`]: claims created before their pod, owned as the retention policy says.
//! - [`watch`]: which StatefulSets a pod or revision event wakes.
//!
//! Promises: never two pods of one ordinal (names are unique); under `OrderedReady` one
//! change at a time, ordinal `n` only once `0..n` are running and available, scale-down and
//! updates from the highest ordinal; pods below `partition` stay on the current revision;
//! never touches a pod another controller controls. Design: `docs/design/statefulsets-daemonsets.md`.

mod claims;
mod error;
mod identity;
mod replicas;
mod status;
mod sync;
mod watch;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use setpoint_runtime::{
    Client, Controller, ControllerError, EventRecorder, InformerOptions, ObjectCache, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use watch::{controller_uid_index, sets_for, BY_CONTROLLER_UID};

/// The controller's name, as kube-controller-manager names it (logs, metrics, Events).
const CONTROLLER_NAME: &str = "statefulset-controller";

/// Syncs of different StatefulSets at once (`--concurrent-statefulset-syncs`).
const CONCURRENT_SYNCS: usize = 5;

/// What every sync shares.
pub(super) struct Context {
    /// Where writes go.
    client: Client,
    /// The shared pod cache, with the [`BY_CONTROLLER_UID`] index.
    pods: ObjectCache<Pod>,
    /// The shared claim cache.
    claims: ObjectCache<PersistentVolumeClaim>,
    /// The shared ControllerRevision cache.
    revisions: ObjectCache<ControllerRevision>,
    /// `SuccessfulCreate`, `SuccessfulDelete`, `FailedCreate` Events on StatefulSets.
    recorder: EventRecorder,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let pod_informer = ctx.factory.informer::<Pod>();
    pod_informer.add_index(BY_CONTROLLER_UID, controller_uid_index());
    let sets = ctx.factory.informer::<StatefulSet>().store();
    let context = Arc::new(Context {
        recorder: EventRecorder::new(
            ctx.client.clone(),
            Reporter::new(CONTROLLER_NAME, "setpoint"),
        ),
        client: ctx.client,
        pods: pod_informer.store(),
        claims: ctx.factory.informer::<PersistentVolumeClaim>().store(),
        revisions: ctx.factory.informer::<ControllerRevision>().store(),
    });
    let (pod_sets, revision_sets) = (sets.clone(), sets);
    Controller::<StatefulSet>::new(&ctx.factory)
        .named(CONTROLLER_NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENT_SYNCS)
        .watches_with(InformerOptions::default(), move |pod: &Pod| {
            sets_for(&pod_sets, &pod.metadata)
        })
        .watches_with(
            InformerOptions::default(),
            move |revision: &ControllerRevision| sets_for(&revision_sets, &revision.metadata),
        )
        .watches_with(InformerOptions::default(), |_: &PersistentVolumeClaim| {
            Vec::new()
        })
        .run(sync::reconcile, context, shutdown.cancelled_owned())
        .await
}
