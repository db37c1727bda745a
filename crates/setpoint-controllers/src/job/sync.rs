//! One sync of one Job (kube-controller-manager's `syncJob`): count its finished pods into its
//! status and release their tracking finalizers ([`tracking`](super::tracking)), then create or
//! delete pods ([`manage`](super::manage)) if its earlier writes have been observed. A finished
//! or deleted Job only has the finalizers of its remaining pods removed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use setpoint_runtime::{update_status, Action, EventDetails, ObjectKey};

use super::conditions::{self, COMPLETE};
use super::error::JobError;
use super::manage::manage;
use super::pods::has_tracking_finalizer;
use super::tracking::{deadline_in, track, Tracked};
use super::watch::BY_JOB_UID;
use super::writes;
use super::Context;

/// Margin added to a wait, so the next sync finds the time passed.
const WAIT_MARGIN: Duration = Duration::from_millis(20);

/// Syncs `job`.
pub(crate) async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, JobError> {
    let key = ObjectKey::of(job.as_ref());
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let pods = ctx.pods.by_index(BY_JOB_UID, &uid)?;
    if job.metadata.deletion_timestamp.is_some() || conditions::is_finished(&job) {
        let left: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| has_tracking_finalizer(p) && !removing(&ctx, &key, p))
            .cloned()
            .collect();
        let (_, error) = writes::release(&ctx, &job, &left).await;
        return error.map_or(Ok(Action::await_change()), Err);
    }
    // Read before the writes: writes observed after this point are in the pod list, or will
    // be by the next sync.
    let writes_observed = ctx.expectations.satisfied(&key);
    let now = Timestamp::now();
    let (mut job, mut tracked) = write_tracking(&ctx, &job, &pods, &HashSet::new(), now).await?;
    if !tracked.release.is_empty() {
        let (removed, error) = writes::release(&ctx, &job, &tracked.release).await;
        if !removed.is_empty() {
            (job, tracked) = write_tracking(&ctx, &job, &pods, &removed, now).await?;
        }
        if let Some(e) = error {
            return Err(e);
        }
    }
    if tracked.finished {
        if let Some(o) = &tracked.outcome {
            let details = if o.terminal == COMPLETE {
                EventDetails::normal("Completed", "Complete").with_note("Job completed")
            } else {
                EventDetails::warning(o.reason.clone(), "Fail").with_note(o.message.clone())
            };
            ctx.recorder.publish_for(&job, details);
        }
        return Ok(Action::await_change());
    }
    let mut wait = None;
    if writes_observed {
        wait = manage(&ctx, &job, &pods, tracked.outcome.as_ref(), now).await?;
    } else if let Some(expiry) = ctx.expectations.expires_in(&key) {
        wait = Some(expiry);
    }
    if tracked.outcome.is_none() && job.spec.as_ref().and_then(|s| s.suspend) != Some(true) {
        let start = job
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0);
        if let Some(deadline) = deadline_in(&job, start, now) {
            wait = Some(wait.map_or(deadline, |w: Duration| w.min(deadline)));
        }
    }
    Ok(wait.map_or(Action::await_change(), |w| Action::requeue(w + WAIT_MARGIN)))
}

/// Whether the finalizer removal of `pod` is under way.
fn removing(ctx: &Context, key: &ObjectKey, pod: &Pod) -> bool {
    ctx.expectations
        .removing_finalizer(key, pod.metadata.uid.as_deref().unwrap_or_default())
}

/// Writes the tracked status of `job` (re-tracked on the freshly read Job, should another
/// writer have changed it), with `removed` the pods whose finalizers this sync removed.
async fn write_tracking(
    ctx: &Context,
    job: &Job,
    pods: &[Arc<Pod>],
    removed: &HashSet<String>,
    now: Timestamp,
) -> Result<(Job, Tracked), JobError> {
    let key = ObjectKey::of(job);
    let released = |p: &Pod| {
        let uid = p.metadata.uid.as_deref().unwrap_or_default();
        !has_tracking_finalizer(p)
            || removed.contains(uid)
            || ctx.expectations.removing_finalizer(&key, uid)
    };
    let api = ctx
        .client
        .namespaced_api::<Job>(job.metadata.namespace.as_deref().unwrap_or_default());
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let mut last = None;
    let written = update_status(&api, name, |j: &mut Job| {
        let tracked = track(j, pods, &released, now);
        j.status = Some(tracked.status.clone());
        last = Some(tracked);
    })
    .await
    .map_err(|source| JobError::Status {
        job: key.to_string(),
        source,
    })?
    .into_object();
    let tracked = match last {
        Some(t) => t,
        None => track(&written, pods, &released, now),
    };
    Ok((written, tracked))
}
