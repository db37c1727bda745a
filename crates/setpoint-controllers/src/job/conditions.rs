//! A Job's conditions: reading them, and setting one the way kube-controller-manager does (a
//! condition whose status changes gets a new transition time; one set again unchanged keeps
//! it). The types, and the reasons and messages the loop writes, are Kubernetes'.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The Job finished successfully.
pub(crate) const COMPLETE: &str = "Complete";
/// The Job finished unsuccessfully.
pub(crate) const FAILED: &str = "Failed";
/// The Job will fail once its remaining pods are gone.
pub(crate) const FAILURE_TARGET: &str = "FailureTarget";
/// The Job will complete once its remaining pods are gone.
pub(crate) const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
/// The Job is suspended (`True`) or was and has resumed (`False`).
pub(crate) const SUSPENDED: &str = "Suspended";

/// Why a Job finishes (or will): a condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// `Complete` or `Failed`.
    pub(crate) terminal: &'static str,
    /// The condition's reason (`CompletionsReached`, `BackoffLimitExceeded`, …).
    pub(crate) reason: String,
    /// The condition's message.
    pub(crate) message: String,
}

impl Outcome {
    pub(crate) fn failed(reason: &str, message: impl Into<String>) -> Outcome {
        Outcome {
            terminal: FAILED,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn complete(reason: &str, message: impl Into<String>) -> Outcome {
        Outcome {
            terminal: COMPLETE,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// The interim condition type: `FailureTarget` or `SuccessCriteriaMet`.
    pub(crate) fn interim(&self) -> &'static str {
        if self.terminal == FAILED {
            FAILURE_TARGET
        } else {
            SUCCESS_CRITERIA_MET
        }
    }
}

/// The job's condition of `type_`, if any.
pub(crate) fn condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether the job has `type_` with status `True`.
pub(crate) fn is_true(job: &Job, type_: &str) -> bool {
    condition(job, type_).is_some_and(|c| c.status == "True")
}

/// Whether the job has finished (`Complete` or `Failed` is `True`).
pub(crate) fn is_finished(job: &Job) -> bool {
    is_true(job, COMPLETE) || is_true(job, FAILED)
}

/// The outcome an interim condition on `job` already decided, if any.
pub(crate) fn decided(job: &Job) -> Option<Outcome> {
    for (interim, terminal) in [(FAILURE_TARGET, FAILED), (SUCCESS_CRITERIA_MET, COMPLETE)] {
        if let Some(c) = condition(job, interim).filter(|c| c.status == "True") {
            return Some(Outcome {
                terminal,
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            });
        }
    }
    None
}

/// Sets condition `type_` in `conditions` to `status` with `reason` and `message`; a change of
/// status moves its transition time to `now`. Returns whether anything changed.
pub(crate) fn set(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
        {
            return false;
        }
        if c.status != status {
            c.last_transition_time = Some(Time(now));
        }
        c.status = status.to_owned();
        c.reason = Some(reason.to_owned());
        c.message = Some(message.to_owned());
        c.last_probe_time = Some(Time(now));
        return true;
    }
    conditions.push(JobCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_should_move_the_transition_time_only_on_a_status_change() {
        let t0 = Timestamp::from_second(1_700_000_000).expect("valid");
        let t1 = Timestamp::from_second(1_700_000_100).expect("valid");
        let mut cs = Vec::new();
        assert!(set(
            &mut cs,
            SUSPENDED,
            "True",
            "JobSuspended",
            "Job suspended",
            t0
        ));
        assert!(!set(
            &mut cs,
            SUSPENDED,
            "True",
            "JobSuspended",
            "Job suspended",
            t1
        ));
        assert!(set(
            &mut cs,
            SUSPENDED,
            "False",
            "JobResumed",
            "Job resumed",
            t1
        ));
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].last_transition_time, Some(Time(t1)));
    }
}
