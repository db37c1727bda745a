//! The TTL-after-finished loop (kube-controller-manager's `ttl-after-finished-controller`):
//! deletes a Job `ttlSecondsAfterFinished` seconds after it finished (its `completionTime`, or
//! the transition time of its `Complete`/`Failed` condition), with foreground propagation so
//! its pods go first. Before deleting it re-reads the Job, so a TTL changed (or a Job
//! re-created under the same name) since the cache saw it is honoured; the delete carries the
//! uid and resourceVersion read as preconditions.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use setpoint_runtime::{Action, Client, Controller, ControllerError};
use tokio_util::sync::CancellationToken;

use crate::job::{is_finished, COMPLETE, FAILED};
use crate::LoopContext;

/// The controller's name, as kube-controller-manager names it.
const CONTROLLER_NAME: &str = "ttl-after-finished-controller";

/// Why a TTL sync failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TtlError {
    /// The Job could not be read or deleted.
    #[error("deleting expired job {job}")]
    Delete {
        /// `namespace/name` of the Job.
        job: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    Controller::<Job>::new(&ctx.factory)
        .named(CONTROLLER_NAME)
        .registered_in(&ctx.metrics)
        .concurrency(5)
        .run(reconcile, Arc::new(ctx.client), shutdown.cancelled_owned())
        .await
}

/// How long until `job` expires (zero once it has); `None` if it has no TTL or is not finished.
pub(crate) fn expires_in(job: &Job, now: Timestamp) -> Option<Duration> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    if !is_finished(job) || job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = job.status.as_ref()?;
    let finished = status.completion_time.as_ref().map(|t| t.0).or_else(|| {
        status
            .conditions
            .as_deref()?
            .iter()
            .find(|c| (c.type_ == COMPLETE || c.type_ == FAILED) && c.status == "True")?
            .last_transition_time
            .as_ref()
            .map(|t| t.0)
    })?;
    let at = finished
        .checked_add(SignedDuration::from_secs(i64::from(ttl)))
        .ok()?;
    Some(if at <= now {
        Duration::ZERO
    } else {
        Duration::try_from(at.duration_since(now)).unwrap_or_default()
    })
}

async fn reconcile(job: Arc<Job>, client: Arc<Client>) -> Result<Action, TtlError> {
    let now = Timestamp::now();
    match expires_in(&job, now) {
        None => return Ok(Action::await_change()),
        Some(wait) if !wait.is_zero() => return Ok(Action::requeue(wait)),
        Some(_) => {}
    }
    let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let key = format!("{namespace}/{name}");
    let api = client.namespaced_api::<Job>(namespace);
    let fail = |source| TtlError::Delete {
        job: key.clone(),
        source,
    };
    let Some(fresh) = api.get_opt(name).await.map_err(fail)? else {
        return Ok(Action::await_change());
    };
    match expires_in(&fresh, now) {
        None => return Ok(Action::await_change()),
        Some(wait) if !wait.is_zero() => return Ok(Action::requeue(wait)),
        Some(_) => {}
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            uid: fresh.metadata.uid.clone(),
            resource_version: fresh.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).expect("valid")
    }

    fn finished_job(ttl: Option<i32>, condition: &str) -> Job {
        Job {
            spec: Some(JobSpec {
                ttl_seconds_after_finished: ttl,
                ..Default::default()
            }),
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: condition.into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(at(0))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_finished_job_should_expire_its_ttl_after_finishing() {
        let job = finished_job(Some(30), FAILED);
        assert_eq!(expires_in(&job, at(10)), Some(Duration::from_secs(20)));
        assert_eq!(expires_in(&job, at(31)), Some(Duration::ZERO));
        assert_eq!(expires_in(&finished_job(None, COMPLETE), at(31)), None);
        assert_eq!(
            expires_in(&finished_job(Some(0), "SuccessCriteriaMet"), at(31)),
            None,
            "not finished yet"
        );
    }
}
