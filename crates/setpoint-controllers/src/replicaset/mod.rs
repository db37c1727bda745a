//! The ReplicaSet loop (kube-controller-manager's `replicaset-controller`): keeps
//! `spec.replicas` active pods matching each ReplicaSet's selector, made from its template and
//! controlled by it, and keeps its status true. The same loop keeps ReplicationControllers
//! (`replicationcontroller`): it is written over [`kind::Replicated`], which both kinds
//! implement (an RC's selector is a label map; everything else has the same shape).
//!
//! - [`sync`]: one sync — claim pods ([`claim`]: adopt matching orphans, release pods that no
//!   longer match), create or delete the difference ([`manage`]: slow-start batches, at most
//!   500 per sync, surplus chosen by [`ranking`]), write the status ([`status`]).
//! - [`expectations`]: a ReplicaSet does not create or delete again until the pod cache has
//!   shown its previous writes (or five minutes have passed), so a lagging cache never makes it
//!   act twice.
//! - [`watch`]: the pod index and handlers that feed the loop.
//!
//! Promises: never touches a pod another controller controls; never adopts for a ReplicaSet
//! being deleted, nor without a live read confirming the cached ReplicaSet; terminating and
//! finished pods do not count. Design and invariants: `docs/design/controllers.md`.

mod claim;
mod error;
mod expectations;
mod kind;
mod manage;
mod pods;
mod ranking;
mod status;
mod sync;
mod watch;

#[cfg(test)]
mod sync_tests;

use std::sync::Arc;

use std::marker::PhantomData;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use setpoint_runtime::{
    Client, Controller, ControllerError, EventRecorder, InformerOptions, ObjectCache, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use expectations::Expectations;
use kind::Replicated;
use watch::{controller_uid_index, ForgetDeleted, ObservePods, PodEvents, BY_CONTROLLER_UID};

/// Syncs of different ReplicaSets at once (kube-controller-manager's `--concurrent-replicaset-syncs`).
const CONCURRENT_SYNCS: usize = 5;

/// What every sync shares.
pub(super) struct Context {
    /// Where writes go.
    client: Client,
    /// The shared pod cache, with the [`BY_CONTROLLER_UID`] index.
    pods: ObjectCache<Pod>,
    /// Writes not yet observed, by ReplicaSet.
    expectations: Arc<Expectations>,
    /// `SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete` Events on ReplicaSets.
    recorder: EventRecorder,
}

/// Runs the ReplicaSet loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    run_for::<ReplicaSet>(ctx, shutdown).await
}

/// Runs the ReplicationController loop until `shutdown` is cancelled.
pub(crate) async fn run_replication_controllers(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    run_for::<ReplicationController>(ctx, shutdown).await
}

/// Runs the loop over the objects of `K`.
async fn run_for<K: Replicated>(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let pod_informer = ctx.factory.informer::<Pod>();
    pod_informer.add_index(BY_CONTROLLER_UID, controller_uid_index());
    let expectations = Arc::new(Expectations::default());
    let rs_informer = ctx.factory.informer::<K>();
    let forget = rs_informer.add_handler(ForgetDeleted {
        expectations: expectations.clone(),
    });
    let replicasets = rs_informer.store();
    let context = Arc::new(Context {
        recorder: EventRecorder::new(ctx.client.clone(), Reporter::new(K::CONTROLLER, "setpoint")),
        client: ctx.client,
        pods: pod_informer.store(),
        expectations: expectations.clone(),
    });
    let result = Controller::<K>::new(&ctx.factory)
        .named(K::CONTROLLER)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENT_SYNCS)
        .watches_handler(InformerOptions::default(), move |enqueuer| PodEvents {
            observe: ObservePods {
                expectations,
                kind: PhantomData,
            },
            replicasets,
            enqueuer,
        })
        .run(sync::reconcile::<K>, context, shutdown.cancelled_owned())
        .await;
    forget.remove();
    result
}
