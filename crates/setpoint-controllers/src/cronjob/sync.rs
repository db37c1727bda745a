//! One sync of one CronJob (kube-controller-manager's `syncCronJob`): bring `status.active` in
//! line with its Jobs (finished ones leave it, with `lastSuccessfulTime`), then — unless it is
//! suspended or being deleted — start the Job of the most recent start time it has not run, if
//! that is not past `startingDeadlineSeconds` and the concurrency policy allows, delete the
//! finished Jobs beyond the history limits, and come back at the next start time.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use setpoint_runtime::{update_status, Action, EventDetails, ObjectKey};

use super::children::{beyond_history, finished_as, job_for, last_success, reference};
use super::schedule::Schedule;
use super::times::{self, most_recent, MISSED_LIMIT};
use super::{Context, CronJobError, BY_CRONJOB_UID};

/// Added to the wait for the next start time, so the sync finds it passed.
const WAIT_MARGIN: Duration = Duration::from_millis(100);

fn utc(t: &Time) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.0.as_second(), 0)
}

fn time(t: DateTime<Utc>) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
        .ok()
        .map(Time)
}

/// Syncs `cronjob`.
pub(crate) async fn reconcile(
    cronjob: Arc<CronJob>,
    ctx: Arc<Context>,
) -> Result<Action, CronJobError> {
    let key = ObjectKey::of(cronjob.as_ref());
    let fail = |source| CronJobError::Api {
        cronjob: key.to_string(),
        source,
    };
    let namespace = cronjob.metadata.namespace.clone().unwrap_or_default();
    let name = cronjob.metadata.name.clone().unwrap_or_default();
    // Decide on the CronJob as stored, not as cached: a cached status one write behind would
    // forget the Job the last sync started (and let Forbid start another).
    let api = ctx.client.namespaced_api::<CronJob>(&namespace);
    let Some(cronjob) = api.get_opt(&name).await.map_err(fail)? else {
        return Ok(Action::await_change());
    };
    let cronjob = Arc::new(cronjob);
    let uid = cronjob.metadata.uid.clone().unwrap_or_default();
    let jobs_api = ctx.client.namespaced_api::<Job>(&namespace);
    let children = ctx.jobs.by_index(BY_CRONJOB_UID, &uid)?;
    let status = cronjob.status.clone().unwrap_or_default();

    // `status.active`: running Jobs it started stay, finished or vanished ones leave.
    let mut active: Vec<ObjectReference> = Vec::new();
    for r in status.active.iter().flatten() {
        match children.iter().find(|j| j.metadata.uid == r.uid) {
            Some(job) => match finished_as(job) {
                None => active.push(r.clone()),
                Some(condition) => ctx.recorder.publish_for(
                    cronjob.as_ref(),
                    EventDetails::normal("SawCompletedJob", "Sync").with_note(format!(
                        "Saw completed job: {}, condition: {condition}",
                        job.metadata.name.as_deref().unwrap_or_default()
                    )),
                ),
            },
            // Not in the cache: gone, unless a live read finds it (a cache behind our create).
            None => {
                let job_name = r.name.clone().unwrap_or_default();
                if let Some(job) = jobs_api.get_opt(&job_name).await.map_err(fail)? {
                    if job.metadata.uid == r.uid && finished_as(&job).is_none() {
                        active.push(r.clone());
                    }
                }
            }
        }
    }
    for job in &children {
        let listed = status
            .active
            .iter()
            .flatten()
            .any(|r| r.uid == job.metadata.uid);
        if !listed && finished_as(job).is_none() {
            ctx.recorder.publish_for(
                cronjob.as_ref(),
                EventDetails::warning("UnexpectedJob", "Sync").with_note(format!(
                    "Saw a job that the controller did not create or forgot: {}",
                    job.metadata.name.as_deref().unwrap_or_default()
                )),
            );
        }
    }
    let mut last_schedule = status.last_schedule_time.clone();
    let last_successful = last_success(&children).or(status.last_successful_time.clone());
    let mut wait = None;

    let spec = cronjob.spec.clone().unwrap_or_default();
    if cronjob.metadata.deletion_timestamp.is_none() && spec.suspend != Some(true) {
        match plan(&ctx, &cronjob, &children, &mut active, &jobs_api).await? {
            Planned::Started(at) => last_schedule = time(at).or(last_schedule),
            Planned::Wait(w) => wait = w,
            Planned::Stop => {}
        }
        // Come back at the next start time.
        if let Ok(schedule) = Schedule::parse(&spec.schedule) {
            if let Ok(zone) = times::zone(spec.time_zone.as_deref()) {
                let now = ctx.clock.now();
                if let Some(next) = times::next_after(&schedule, zone, now) {
                    let until = (next - now).to_std().unwrap_or_default() + WAIT_MARGIN;
                    wait = Some(wait.map_or(until, |w: Duration| w.min(until)));
                }
            }
        }
    }

    update_status(&api, &name, |cj: &mut CronJob| {
        let st = cj.status.get_or_insert_with(Default::default);
        st.active = (!active.is_empty()).then(|| active.clone());
        st.last_schedule_time.clone_from(&last_schedule);
        st.last_successful_time.clone_from(&last_successful);
    })
    .await
    .map_err(|source| CronJobError::Status {
        cronjob: key.to_string(),
        source,
    })?;

    // Finished Jobs beyond the history limits.
    for job in beyond_history(
        &children,
        spec.successful_jobs_history_limit,
        spec.failed_jobs_history_limit,
    ) {
        delete_job(&ctx, &cronjob, &jobs_api, &job)
            .await
            .map_err(fail)?;
    }
    Ok(wait.map_or(Action::await_change(), |w| {
        Action::requeue(ctx.clock.sleep_for(w))
    }))
}

/// What [`plan`] did.
enum Planned {
    /// Started the Job of this start time.
    Started(DateTime<Utc>),
    /// Started nothing; look again after this long (if at all).
    Wait(Option<Duration>),
    /// The schedule or zone is unusable: nothing to do until the CronJob changes.
    Stop,
}

/// Starts the Job of the most recent missed start time, if it is due and allowed.
async fn plan(
    ctx: &Context,
    cronjob: &CronJob,
    children: &[Arc<Job>],
    active: &mut Vec<ObjectReference>,
    jobs_api: &kube::Api<Job>,
) -> Result<Planned, CronJobError> {
    let key = ObjectKey::of(cronjob);
    let fail = |source| CronJobError::Api {
        cronjob: key.to_string(),
        source,
    };
    let spec = cronjob.spec.clone().unwrap_or_default();
    let schedule = match Schedule::parse(&spec.schedule) {
        Ok(s) => s,
        Err(e) => {
            ctx.recorder.publish_for(
                cronjob,
                EventDetails::warning("UnparseableSchedule", "Sync")
                    .with_note(format!("unparseable schedule: {:?} : {e}", spec.schedule)),
            );
            return Ok(Planned::Stop);
        }
    };
    let zone = match times::zone(spec.time_zone.as_deref()) {
        Ok(z) => z,
        Err(e) => {
            ctx.recorder.publish_for(
                cronjob,
                EventDetails::warning("UnknownTimeZone", "Sync").with_note(format!(
                    "invalid timeZone: {:?}: {e}",
                    spec.time_zone.as_deref().unwrap_or_default()
                )),
            );
            return Ok(Planned::Stop);
        }
    };
    let now = ctx.clock.now();
    let status = cronjob.status.clone().unwrap_or_default();
    let created = cronjob.metadata.creation_timestamp.as_ref().and_then(utc);
    let mut earliest = status
        .last_schedule_time
        .as_ref()
        .and_then(utc)
        .or(created)
        .unwrap_or(now);
    if let Some(deadline) = spec.starting_deadline_seconds {
        earliest = earliest.max(now - chrono::Duration::seconds(deadline));
    }
    let missed = most_recent(&schedule, zone, earliest, now);
    if missed.count > MISSED_LIMIT {
        ctx.recorder.publish_for(
            cronjob,
            EventDetails::warning("TooManyMissedTimes", "Sync").with_note(format!(
                "too many missed start times: {}. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
                missed.count
            )),
        );
    }
    let Some(scheduled) = missed.last else {
        return Ok(Planned::Wait(None));
    };
    if let Some(deadline) = spec.starting_deadline_seconds {
        if scheduled + chrono::Duration::seconds(deadline) < now {
            ctx.recorder.publish_for(
                cronjob,
                EventDetails::warning("MissSchedule", "Sync").with_note(format!(
                    "Missed scheduled time to start a job: {}",
                    scheduled.to_rfc3339()
                )),
            );
            return Ok(Planned::Wait(None));
        }
    }
    let name = cronjob.metadata.name.as_deref().unwrap_or_default();
    let job_name = times::job_name(name, scheduled);
    if active
        .iter()
        .any(|r| r.name.as_deref() == Some(job_name.as_str()))
        || children
            .iter()
            .any(|j| j.metadata.name.as_deref() == Some(job_name.as_str()))
    {
        return Ok(Planned::Wait(None));
    }
    match spec.concurrency_policy.as_deref() {
        Some("Forbid") if !active.is_empty() => {
            ctx.recorder.publish_for(
                cronjob,
                EventDetails::normal("JobAlreadyActive", "Sync").with_note(
                    "Not starting job because prior execution is running and concurrency policy is Forbid",
                ),
            );
            return Ok(Planned::Wait(None));
        }
        Some("Replace") => {
            for r in std::mem::take(active) {
                let Some(job) = children.iter().find(|j| j.metadata.uid == r.uid) else {
                    continue;
                };
                delete_job(ctx, cronjob, jobs_api, job)
                    .await
                    .map_err(fail)?;
            }
        }
        _ => {}
    }
    let job = job_for(
        cronjob,
        job_name,
        times::scheduled_timestamp(scheduled, zone),
    );
    match jobs_api.create(&PostParams::default(), &job).await {
        Ok(created) => {
            ctx.recorder.publish_for(
                cronjob,
                EventDetails::normal("SuccessfulCreate", "Create").with_note(format!(
                    "Created job {}",
                    created.metadata.name.as_deref().unwrap_or_default()
                )),
            );
            active.push(reference(&created));
            Ok(Planned::Started(scheduled))
        }
        // Made by an earlier sync whose status write was lost: it is that start's Job.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Planned::Started(scheduled)),
        Err(source) => {
            ctx.recorder.publish_for(
                cronjob,
                EventDetails::warning("FailedCreate", "Create")
                    .with_note(format!("Error creating job: {source}")),
            );
            Err(fail(source))
        }
    }
}

/// Deletes `job` (its pods in the background) and records it.
async fn delete_job(
    ctx: &Context,
    cronjob: &CronJob,
    api: &kube::Api<Job>,
    job: &Job,
) -> Result<(), kube::Error> {
    let name = job.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => {
            ctx.recorder.publish_for(
                cronjob,
                EventDetails::normal("SuccessfulDelete", "Delete")
                    .with_note(format!("Deleted job {name}")),
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
