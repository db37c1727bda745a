//! A CronJob's Jobs: the Job made for one start time, how a finished one ended, the reference
//! `status.active` keeps to a running one, and which finished ones the history limits delete.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use setpoint_runtime::owner;

use crate::job::{COMPLETE, FAILED};

/// The Job `cronjob` runs at `scheduled`, named `name`, with its template's metadata and spec,
/// the scheduled-time annotation and `cronjob` as its controller.
pub(crate) fn job_for(cronjob: &CronJob, name: String, timestamp: String) -> Job {
    let template = cronjob.spec.as_ref().map(|s| &s.job_template);
    let meta = template.and_then(|t| t.metadata.as_ref());
    let mut annotations = meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(super::times::SCHEDULED_TIMESTAMP.to_owned(), timestamp);
    Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: cronjob.metadata.namespace.clone(),
            labels: meta.and_then(|m| m.labels.clone()),
            annotations: Some(annotations),
            owner_references: Some(vec![owner::controller_ref_to(cronjob)]),
            ..Default::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    }
}

/// How a Job ended: `Some("Complete")` or `Some("Failed")`; `None` while it runs.
pub(crate) fn finished_as(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_deref()?;
    [COMPLETE, FAILED].into_iter().find(|t| {
        conditions
            .iter()
            .any(|c| c.type_ == *t && c.status == "True")
    })
}

/// The reference to `job` kept in `status.active`.
pub(crate) fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".to_owned()),
        kind: Some("Job".to_owned()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// When `job` started (`status.startTime`, else its creation), for ordering the history.
fn started(job: &Job) -> Option<DateTime<Utc>> {
    let t = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(job.metadata.creation_timestamp.as_ref())?;
    DateTime::from_timestamp(t.0.as_second(), 0)
}

/// The finished Jobs among `jobs` beyond the history limits, oldest first: successful ones
/// past `successful` (if set), failed ones past `failed` (if set).
pub(crate) fn beyond_history(
    jobs: &[Arc<Job>],
    successful: Option<i32>,
    failed: Option<i32>,
) -> Vec<Arc<Job>> {
    let mut doomed = Vec::new();
    for (kind, limit) in [(COMPLETE, successful), (FAILED, failed)] {
        let Some(limit) = limit else { continue };
        let mut these: Vec<&Arc<Job>> = jobs
            .iter()
            .filter(|j| finished_as(j) == Some(kind))
            .collect();
        these.sort_by_key(|j| started(j));
        let keep = usize::try_from(limit).unwrap_or(0);
        let extra = these.len().saturating_sub(keep);
        doomed.extend(these.into_iter().take(extra).cloned());
    }
    doomed
}

/// The latest `completionTime` among the Jobs that completed.
pub(crate) fn last_success(
    jobs: &[Arc<Job>],
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    jobs.iter()
        .filter(|j| finished_as(j) == Some(COMPLETE))
        .filter_map(|j| j.status.as_ref()?.completion_time.clone())
        .max_by_key(|t| t.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn finished(name: &str, kind: &str, start: i64) -> Arc<Job> {
        Arc::new(Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: None,
            status: Some(JobStatus {
                start_time: Some(Time(Timestamp::from_second(start).expect("valid"))),
                conditions: Some(vec![JobCondition {
                    type_: kind.into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn history_should_keep_the_newest_of_each_kind() {
        let jobs = [
            finished("ok-1", COMPLETE, 1),
            finished("ok-3", COMPLETE, 3),
            finished("ok-2", COMPLETE, 2),
            finished("bad-1", FAILED, 1),
            finished("bad-2", FAILED, 2),
        ];
        let names: Vec<String> = beyond_history(&jobs, Some(1), Some(1))
            .iter()
            .filter_map(|j| j.metadata.name.clone())
            .collect();
        assert_eq!(names, ["ok-1", "ok-2", "bad-1"]);
        assert!(beyond_history(&jobs, None, None).is_empty());
    }
}
