//! Counting a Job's pods into its status (kube-controller-manager's finalizer-based tracking),
//! as one pure function of the Job as last read, its pods and which pods' tracking finalizers
//! are known to be gone — so it can be re-applied to a freshly read Job after a conflict.
//!
//! A finished pod still carrying `batch.kubernetes.io/job-tracking` is first recorded in
//! `status.uncountedTerminatedPods` (an Indexed Job's successes go straight to
//! `completedIndexes`), then its finalizer is removed, and only then is its uid moved into
//! `succeeded`/`failed`. A pod is therefore counted exactly once, even across a restart of the
//! loop, and can be deleted by anyone without being lost. The same pass sets `active`, `ready`,
//! `terminating`, `startTime`, the `Suspended` condition, decides the outcome (`FailureTarget`
//! or `SuccessCriteriaMet`) and, once no pod runs or waits to be counted, the terminal
//! condition (`Complete` or `Failed`) and `completionTime`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::conditions::{self, Outcome, COMPLETE, FAILED, SUSPENDED};
use super::failure_policy::{judge, Verdict};
use super::indexes::{self, Indexes};
use super::pods::{
    completion_index, has_tracking_finalizer, index_failure_count, is_active, is_failed,
    is_phase_failed, is_ready, is_succeeded, is_terminating,
};
use super::success_policy::matched_rule;

/// The default `backoffLimit` (the API server defaults it too).
const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// What one tracking pass decided.
#[derive(Debug)]
pub(crate) struct Tracked {
    /// The status to write.
    pub(crate) status: JobStatus,
    /// Pods whose tracking finalizer is to be removed now.
    pub(crate) release: Vec<Arc<Pod>>,
    /// The outcome decided (now or before), if any.
    pub(crate) outcome: Option<Outcome>,
    /// Set when this pass adds the terminal condition.
    pub(crate) finished: bool,
}

/// The Job's settings the pass reads, with the API server's defaults.
struct Settings<'a> {
    indexed: bool,
    completions: Option<i32>,
    per_index: Option<i32>,
    job: &'a Job,
}

/// Tracks `pods` (the pods `job` controls) into `job`'s status at `now`. `released` tells
/// whether a pod's tracking finalizer is gone or its removal already under way.
pub(crate) fn track(
    job: &Job,
    pods: &[Arc<Pod>],
    released: &dyn Fn(&Pod) -> bool,
    now: Timestamp,
) -> Tracked {
    let spec = job.spec.clone().unwrap_or_default();
    let s = Settings {
        indexed: spec.completion_mode.as_deref() == Some("Indexed"),
        completions: spec.completions,
        per_index: spec.backoff_limit_per_index,
        job,
    };
    let mut st = job.status.clone().unwrap_or_default();
    let uncounted = st.uncounted_terminated_pods.take().unwrap_or_default();
    let mut us = uncounted.succeeded.unwrap_or_default();
    let mut uf = uncounted.failed.unwrap_or_default();
    let by_uid: HashMap<&str, &Arc<Pod>> = pods
        .iter()
        .filter_map(|p| Some((p.metadata.uid.as_deref()?, p)))
        .collect();
    let mut succeeded = st.succeeded.unwrap_or(0);
    let mut failed = st.failed.unwrap_or(0);
    // Uncounted pods whose finalizer is gone (or that are gone) are counted now.
    let gone = |uid: &String| by_uid.get(uid.as_str()).is_none_or(|p| released(p));
    let before = (us.len(), uf.len());
    us.retain(|uid| !gone(uid));
    uf.retain(|uid| !gone(uid));
    succeeded += count(before.0 - us.len());
    failed += count(before.1 - uf.len());

    let limit = s.indexed.then_some(s.completions).flatten();
    let mut completed = indexes::parse(st.completed_indexes.as_deref(), limit);
    let mut failed_ix = indexes::parse(st.failed_indexes.as_deref(), limit);
    let mut outcome = conditions::decided(job);
    let rules = spec
        .pod_failure_policy
        .as_ref()
        .map(|p| p.rules.as_slice())
        .unwrap_or_default();
    let mut fail_job = None;
    let mut release = Vec::new();
    // Membership of `us` and `uf`, for lookups in constant time.
    let mut uncounted_uids: HashSet<String> = us.iter().chain(uf.iter()).cloned().collect();
    for pod in pods {
        let Some(uid) = pod.metadata.uid.as_ref() else {
            continue;
        };
        if !has_tracking_finalizer(pod) || released(pod) {
            continue;
        }
        if uncounted_uids.contains(uid) {
            release.push(pod.clone());
            continue;
        }
        let index = s
            .completions
            .filter(|_| s.indexed)
            .and_then(|c| completion_index(pod, c));
        if is_succeeded(pod) {
            if s.indexed {
                if let Some(i) = index.filter(|i| !failed_ix.contains(i)) {
                    completed.insert(i);
                }
            } else {
                us.push(uid.clone());
                uncounted_uids.insert(uid.clone());
            }
            release.push(pod.clone());
        } else if is_failed(pod, job) {
            let verdict = if is_phase_failed(pod) && !rules.is_empty() {
                judge(rules, pod)
            } else {
                Verdict::Count
            };
            match verdict {
                Verdict::Ignore => {
                    release.push(pod.clone());
                    continue;
                }
                Verdict::FailJob(message) => {
                    fail_job.get_or_insert(message);
                }
                Verdict::FailIndex => failed_ix.extend(index),
                Verdict::Count => {
                    if let (Some(limit), Some(i)) = (s.per_index, index) {
                        if index_failure_count(pod).saturating_add(1) > limit {
                            failed_ix.insert(i);
                        }
                    }
                }
            }
            uf.push(uid.clone());
            uncounted_uids.insert(uid.clone());
            release.push(pod.clone());
        } else if let Some(o) = outcome.as_ref().filter(|_| !is_active(pod)) {
            // A pod being deleted because the Job's outcome is decided: a failure if the Job
            // fails, not counted if it succeeds.
            if o.terminal == FAILED {
                uf.push(uid.clone());
            }
            release.push(pod.clone());
        }
    }

    let active = count(pods.iter().filter(|p| is_active(p)).count());
    let ready = count(pods.iter().filter(|p| is_active(p) && is_ready(p)).count());
    let terminating = count(pods.iter().filter(|p| is_terminating(p)).count());
    let total_failed = failed + count(uf.len());
    let total_succeeded = if s.indexed {
        count(completed.len())
    } else {
        succeeded + count(us.len())
    };

    let suspended = spec.suspend == Some(true);
    let mut conds = st.conditions.take().unwrap_or_default();
    if outcome.is_none() {
        if suspended {
            conditions::set(
                &mut conds,
                SUSPENDED,
                "True",
                "JobSuspended",
                "Job suspended",
                now,
            );
        } else if conditions::condition(job, SUSPENDED).is_some()
            && conditions::set(
                &mut conds,
                SUSPENDED,
                "False",
                "JobResumed",
                "Job resumed",
                now,
            )
        {
            // Resuming starts the clock of `activeDeadlineSeconds` again.
            st.start_time = Some(Time(now));
        }
    }
    if !suspended && st.start_time.is_none() {
        st.start_time = Some(Time(now));
    }

    if outcome.is_none() {
        outcome = decide(
            &s,
            Counts {
                fail_job,
                failed: total_failed,
                succeeded: total_succeeded,
                active,
                completed: &completed,
                failed_ix: &failed_ix,
            },
            st.start_time.as_ref().map(|t| t.0),
            suspended,
            now,
        );
        if let Some(o) = &outcome {
            conditions::set(&mut conds, o.interim(), "True", &o.reason, &o.message, now);
        }
    }
    let mut finished = false;
    if let Some(o) = &outcome {
        let settled =
            active == 0 && terminating == 0 && us.is_empty() && uf.is_empty() && release.is_empty();
        if settled && !conditions::is_finished(job) {
            conditions::set(&mut conds, o.terminal, "True", &o.reason, &o.message, now);
            if o.terminal == COMPLETE {
                st.completion_time = Some(Time(now));
            }
            finished = true;
        }
    }

    st.conditions = (!conds.is_empty()).then_some(conds);
    st.active = Some(active);
    st.ready = Some(ready);
    st.terminating = Some(terminating);
    st.succeeded = Some(succeeded);
    st.failed = Some(failed);
    if s.indexed {
        st.succeeded = Some(count(completed.len()));
        st.completed_indexes = indexes::format(&completed);
        st.failed_indexes = s
            .per_index
            .map(|_| indexes::format(&failed_ix).unwrap_or_default());
    }
    st.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: (!us.is_empty()).then_some(us),
        failed: (!uf.is_empty()).then_some(uf),
    });
    Tracked {
        status: st,
        release,
        outcome,
        finished,
    }
}

/// What [`decide`] weighs.
struct Counts<'a> {
    fail_job: Option<String>,
    failed: i32,
    succeeded: i32,
    active: i32,
    completed: &'a Indexes,
    failed_ix: &'a Indexes,
}

/// The outcome the counts decide, in kube-controller-manager's order: a `FailJob` rule, the
/// backoff limit, the failed-index limit, the active deadline, the success policy, completion.
fn decide(
    s: &Settings<'_>,
    c: Counts<'_>,
    start: Option<Timestamp>,
    suspended: bool,
    now: Timestamp,
) -> Option<Outcome> {
    let spec = s.job.spec.as_ref()?;
    if let Some(message) = c.fail_job {
        return Some(Outcome::failed("PodFailurePolicy", message));
    }
    if c.failed > spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT) {
        return Some(Outcome::failed(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ));
    }
    if s.indexed
        && spec
            .max_failed_indexes
            .is_some_and(|m| count(c.failed_ix.len()) > m)
    {
        return Some(Outcome::failed(
            "MaxFailedIndexesExceeded",
            "Job has exceeded the specified maximal number of failed indexes",
        ));
    }
    if !suspended && deadline_in(s.job, start, now) == Some(std::time::Duration::ZERO) {
        return Some(Outcome::failed(
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        ));
    }
    if s.indexed {
        if let Some(rule) = matched_rule(s.job, c.completed) {
            return Some(Outcome::complete(
                "SuccessPolicy",
                format!("Matched rules at index {rule}"),
            ));
        }
        let completions = s.completions.unwrap_or(0);
        if count(c.completed.len() + c.failed_ix.len()) >= completions {
            return Some(if c.failed_ix.is_empty() {
                reached()
            } else {
                Outcome::failed("FailedIndexes", "Job has failed indexes")
            });
        }
        return None;
    }
    match s.completions {
        Some(n) if c.succeeded >= n => Some(reached()),
        None if c.succeeded > 0 && c.active == 0 => Some(reached()),
        _ => None,
    }
}

fn reached() -> Outcome {
    Outcome::complete(
        "CompletionsReached",
        "Reached expected number of succeeded pods",
    )
}

/// How long until `job`'s `activeDeadlineSeconds` passes (zero once it has); `None` without a
/// deadline or a start time.
pub(crate) fn deadline_in(
    job: &Job,
    start: Option<Timestamp>,
    now: Timestamp,
) -> Option<std::time::Duration> {
    let seconds = job.spec.as_ref()?.active_deadline_seconds?;
    let end = start?
        .checked_add(SignedDuration::from_secs(seconds))
        .ok()?;
    Some(if end <= now {
        std::time::Duration::ZERO
    } else {
        std::time::Duration::try_from(end.duration_since(now)).unwrap_or_default()
    })
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
