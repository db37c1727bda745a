//! The Job loop (kube-controller-manager's `job-controller`): runs each Job's pods to
//! completion — `completions` and `parallelism`, NonIndexed or Indexed (`JOB_COMPLETION_INDEX`),
//! `backoffLimit` with exponential recreation backoff, `backoffLimitPerIndex` and
//! `maxFailedIndexes`, `activeDeadlineSeconds`, `podFailurePolicy`, `successPolicy`, `suspend`,
//! `podReplacementPolicy` — and keeps its status, counting every pod exactly once through the
//! `batch.kubernetes.io/job-tracking` finalizer.
//!
//! - [`sync`]: one sync — [`tracking`] (status, outcome, conditions), then [`manage`] (creates
//!   and deletes, through [`writes`]).
//! - [`pods`]: what a pod says (active, finished, index) and how one is made.
//! - [`failure_policy`], [`success_policy`], [`backoff`], [`indexes`], [`conditions`]: the
//!   rules, each on its own.
//! - [`expectations`]: creates, deletes and finalizer removals the cache has not shown yet.
//! - [`watch`]: the pod index and handler feeding the loop; [`orphans`]: releasing the pods of
//!   Jobs that are gone.
//!
//! Promises: never touches a pod another controller controls; a Job's outcome, once decided
//! (`FailureTarget`, `SuccessCriteriaMet`), never changes; its terminal condition is written
//! only when no pod of it runs or waits to be counted. Design: `docs/design/jobs.md`.

mod backoff;
mod conditions;
mod error;
mod expectations;
mod failure_policy;
mod indexes;
mod manage;
mod orphans;
mod pods;
mod success_policy;
mod sync;
mod tracking;
mod watch;
mod writes;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::{
    Client, Controller, ControllerError, EventRecorder, InformerOptions, ObjectCache, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use expectations::Expectations;
use watch::{job_uid_index, ForgetDeleted, PodEvents, BY_JOB_UID};

pub(crate) use conditions::{is_finished, COMPLETE, FAILED};

/// The controller's name, as kube-controller-manager names it (logs, metrics, Events).
const CONTROLLER_NAME: &str = "job-controller";

/// Syncs of different Jobs at once (kube-controller-manager's `--concurrent-job-syncs`).
const CONCURRENT_SYNCS: usize = 5;

/// What every sync shares.
pub(crate) struct Context {
    /// Where writes go.
    client: Client,
    /// The shared pod cache, with the [`BY_JOB_UID`] index.
    pods: ObjectCache<Pod>,
    /// Writes not yet observed, by Job.
    expectations: Arc<Expectations>,
    /// Pod create/delete and completion Events on Jobs.
    recorder: EventRecorder,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let pod_informer = ctx.factory.informer::<Pod>();
    pod_informer.add_index(BY_JOB_UID, job_uid_index());
    let expectations = Arc::new(Expectations::default());
    let job_informer = ctx.factory.informer::<Job>();
    let forget = job_informer.add_handler(ForgetDeleted {
        expectations: expectations.clone(),
        pods: pod_informer.store(),
        client: ctx.client.clone(),
    });
    let jobs = job_informer.store();
    let orphan_client = ctx.client.clone();
    let context = Arc::new(Context {
        recorder: EventRecorder::new(
            ctx.client.clone(),
            Reporter::new(CONTROLLER_NAME, "setpoint"),
        ),
        client: ctx.client,
        pods: pod_informer.store(),
        expectations: expectations.clone(),
    });
    let result = Controller::<Job>::new(&ctx.factory)
        .named(CONTROLLER_NAME)
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENT_SYNCS)
        .watches_handler(InformerOptions::default(), move |enqueuer| PodEvents {
            expectations,
            enqueuer,
            jobs,
            client: orphan_client,
        })
        .run(sync::reconcile, context, shutdown.cancelled_owned())
        .await;
    forget.remove();
    result
}
