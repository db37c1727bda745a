//! The CronJob loop (kube-controller-manager's `cronjob-controller`, v2): creates a Job for
//! each start time of a CronJob's schedule ([`schedule`]: our own cron parser; `timeZone`
//! through the IANA database), named `<cronjob>-<minutes since the epoch>` and annotated with
//! its scheduled time; honours `concurrencyPolicy` (Allow, Forbid, Replace),
//! `startingDeadlineSeconds`, `suspend` and the history limits; keeps `status.active`,
//! `lastScheduleTime` and `lastSuccessfulTime`; warns of more than 100 missed start times.
//!
//! - [`sync`]: one sync; [`times`]: missed start times, names; [`children`]: its Jobs.
//!
//! Time comes from the context's [`Clock`](crate::Clock): tests move a manual clock and see
//! schedules run in milliseconds. Each CronJob is looked at again at its next start time.

mod children;
mod schedule;
mod sync;
mod times;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use setpoint_runtime::owner::controller_ref_of_kind;
use setpoint_runtime::{
    Client, Controller, ControllerError, EventRecorder, IndexFn, ObjectCache, ObjectKey, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::{Clock, LoopContext};

/// The controller's name, as kube-controller-manager names it.
const CONTROLLER_NAME: &str = "cronjob-controller";

/// The Job cache index filing each Job under the uid of the CronJob controlling it.
const BY_CRONJOB_UID: &str = "cronjob.setpoint.dev/controller-uid";

/// Why a CronJob sync failed; every variant is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CronJobError {
    /// Reading, creating or deleting a Job failed.
    #[error("managing the jobs of cronjob {cronjob}")]
    Api {
        /// `namespace/name` of the CronJob.
        cronjob: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The status could not be written.
    #[error("writing the status of cronjob {cronjob}")]
    Status {
        /// `namespace/name` of the CronJob.
        cronjob: String,
        /// The status update error.
        #[source]
        source: setpoint_runtime::StatusError,
    },
    /// The Job index is missing from the Job cache.
    #[error("reading the job cache")]
    Cache(#[from] setpoint_runtime::CacheError),
}

/// What every sync shares.
pub(crate) struct Context {
    client: Client,
    /// The shared Job cache, with the [`BY_CRONJOB_UID`] index.
    jobs: ObjectCache<Job>,
    recorder: EventRecorder,
    clock: Clock,
}

/// The key of the CronJob controlling `job`, if one does.
fn cronjob_of(job: &Job) -> Option<ObjectKey> {
    let owner = controller_ref_of_kind::<CronJob>(&job.metadata)?;
    Some(ObjectKey {
        namespace: job.metadata.namespace.clone(),
        name: owner.name.clone(),
    })
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let job_informer = ctx.factory.informer::<Job>();
    let index: IndexFn<Job> = Arc::new(|job: &Job| {
        controller_ref_of_kind::<CronJob>(&job.metadata)
            .map(|r| vec![r.uid.clone()])
            .unwrap_or_default()
    });
    job_informer.add_index(BY_CRONJOB_UID, index);
    let context = Arc::new(Context {
        recorder: EventRecorder::new(
            ctx.client.clone(),
            Reporter::new(CONTROLLER_NAME, "setpoint"),
        ),
        client: ctx.client,
        jobs: job_informer.store(),
        clock: ctx.clock,
    });
    Controller::<CronJob>::new(&ctx.factory)
        .named(CONTROLLER_NAME)
        .registered_in(&ctx.metrics)
        .concurrency(5)
        .watches(|job: &Job| cronjob_of(job))
        .run(sync::reconcile, context, shutdown.cancelled_owned())
        .await
}
