//! A Deployment's status, computed from its ReplicaSets as Kubernetes computes it:
//!
//! - `replicas` Σ `status.replicas`; `updatedReplicas` the new ReplicaSet's; `readyReplicas`
//!   and `availableReplicas` Σ of theirs; `unavailableReplicas` Σ `spec.replicas` −
//!   available (at least 0); `observedGeneration` the generation acted on; `collisionCount`
//!   kept.
//! - `Available`: `True`/`MinimumReplicasAvailable` while available ≥ `spec.replicas −
//!   maxUnavailable`, else `False`/`MinimumReplicasUnavailable`.
//! - `Progressing` (only with a progress deadline): `NewReplicaSetAvailable` when the rollout
//!   is complete; `ReplicaSetUpdated` whenever this sync sees progress (more updated, ready or
//!   available pods, or fewer old ones) — its `lastUpdateTime` moves, its
//!   `lastTransitionTime` stays while it stays `True`; `ProgressDeadlineExceeded` (`False`)
//!   once `progressDeadlineSeconds` pass after the last progress; `DeploymentPaused` /
//!   `DeploymentResumed` (`Unknown`) when paused and resumed.
//! - `ReplicaFailure` copied from the ReplicaSets' (the new one's first).
//!
//! A condition set again with the same status and reason is left as it was.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::replicasets::{
    desired, ready_replicas, status_replicas, sum_available, sum_spec, sum_status,
};
use super::sizing::max_unavailable;

/// Condition type: enough pods are available.
pub(super) const AVAILABLE: &str = "Available";
/// Condition type: the rollout moves (or has finished, or is stuck).
pub(super) const PROGRESSING: &str = "Progressing";
/// Condition type: a ReplicaSet cannot create or delete pods.
const REPLICA_FAILURE: &str = "ReplicaFailure";

/// `Progressing` reason: a new ReplicaSet was created.
pub(super) const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
/// `Progressing` reason: the new ReplicaSet was found.
pub(super) const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// `Progressing` reason: the rollout made progress.
const RS_UPDATED: &str = "ReplicaSetUpdated";
/// `Progressing` reason: the rollout is complete.
pub(super) const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// `Progressing` reason: no progress within the deadline.
pub(super) const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// `Progressing` reason: the Deployment is paused.
const PAUSED: &str = "DeploymentPaused";
/// `Progressing` reason: the Deployment was resumed.
const RESUMED: &str = "DeploymentResumed";
/// `Progressing` reason: the new ReplicaSet could not be created.
pub(super) const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";

/// A condition stamped `now`.
pub(super) fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The condition of `type_`, if set.
pub(super) fn get_condition<'a>(
    status: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Sets `new` (Kubernetes' `SetDeploymentCondition`): nothing changes if the condition is
/// already there with the same status and reason; its transition time is kept if the status
/// is the same.
pub(super) fn set_condition(status: &mut DeploymentStatus, mut new: DeploymentCondition) {
    if let Some(current) = get_condition(status, &new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_condition(status, &new.type_);
    status.conditions.get_or_insert_with(Vec::new).push(new);
}

/// Removes the condition of `type_`.
pub(super) fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
    }
}

/// `progressDeadlineSeconds`, unless unset or "never" (`i32::MAX`).
pub(super) fn progress_deadline(d: &Deployment) -> Option<Duration> {
    let seconds = d.spec.as_ref()?.progress_deadline_seconds?;
    (seconds != i32::MAX).then(|| Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

/// The status `d` has with `all` its ReplicaSets (`new` among them, if any) — counts and the
/// `Available` condition; other conditions as they were.
pub(super) fn calculate(
    d: &Deployment,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    now: Timestamp,
) -> DeploymentStatus {
    let old = d.status.clone().unwrap_or_default();
    let available = sum_available(all);
    let unavailable = (sum_spec(all) - available).max(0);
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(sum_status(all)),
        updated_replicas: Some(new.map_or(0, status_replicas)),
        ready_replicas: Some(all.iter().map(|rs| ready_replicas(rs)).sum()),
        available_replicas: Some(available),
        unavailable_replicas: Some(unavailable),
        collision_count: old.collision_count,
        conditions: old.conditions,
        terminating_replicas: old.terminating_replicas,
    };
    if available >= desired(d) - max_unavailable(d) {
        set_condition(
            &mut status,
            condition(
                AVAILABLE,
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
                now,
            ),
        );
    } else {
        set_condition(
            &mut status,
            condition(
                AVAILABLE,
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
                now,
            ),
        );
    }
    status
}

/// Whether the rollout is done: every replica updated and available, no old ones left, and the
/// latest generation observed (Kubernetes' `DeploymentComplete`).
pub(super) fn complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let replicas = desired(d);
    status.updated_replicas.unwrap_or(0) == replicas
        && status.replicas.unwrap_or(0) == replicas
        && status.available_replicas.unwrap_or(0) == replicas
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// Whether `new` shows progress over `d`'s current status.
fn progressed(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// Whether the deadline has passed since the `Progressing` condition last moved.
fn timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let (Some(deadline), Some(c)) = (progress_deadline(d), get_condition(status, PROGRESSING))
    else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|from| deadline_at(from.0, deadline) < now),
    }
}

fn deadline_at(from: Timestamp, deadline: Duration) -> Timestamp {
    let deadline = SignedDuration::try_from(deadline).unwrap_or(SignedDuration::MAX);
    from.checked_add(deadline).unwrap_or(Timestamp::MAX)
}

/// The status after a rollout step (Kubernetes' `syncRolloutStatus`): [`calculate`], then
/// the `Progressing` and `ReplicaFailure` conditions.
pub(super) fn rollout(
    d: &Deployment,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    now: Timestamp,
) -> DeploymentStatus {
    let mut status = calculate(d, all, new, now);
    let name = d.metadata.name.as_deref().unwrap_or_default();
    let subject = |verb: &str| match new {
        Some(rs) => format!(
            "ReplicaSet {:?} {verb}.",
            rs.metadata.name.as_deref().unwrap_or_default()
        ),
        None => format!("Deployment {name:?} {verb}."),
    };
    if progress_deadline(d).is_none() {
        remove_condition(&mut status, PROGRESSING);
    }
    let current = d
        .status
        .as_ref()
        .and_then(|s| get_condition(s, PROGRESSING))
        .cloned();
    let already_complete = status.replicas == status.updated_replicas
        && current
            .as_ref()
            .is_some_and(|c| c.reason.as_deref() == Some(NEW_RS_AVAILABLE));
    if progress_deadline(d).is_some() && !already_complete {
        if complete(d, &status) {
            set_condition(
                &mut status,
                condition(
                    PROGRESSING,
                    "True",
                    NEW_RS_AVAILABLE,
                    subject("has successfully progressed"),
                    now,
                ),
            );
        } else if progressed(d, &status) {
            let mut c = condition(
                PROGRESSING,
                "True",
                RS_UPDATED,
                subject("is progressing"),
                now,
            );
            if let Some(current) = &current {
                if current.status == "True" {
                    c.last_transition_time = current.last_transition_time.clone();
                }
                remove_condition(&mut status, PROGRESSING);
            }
            set_condition(&mut status, c);
        } else if timed_out(d, &status, now) {
            set_condition(
                &mut status,
                condition(
                    PROGRESSING,
                    "False",
                    TIMED_OUT,
                    subject("has timed out progressing"),
                    now,
                ),
            );
        }
    }
    match replica_failure(all, new) {
        Some(failure) => set_condition(&mut status, failure),
        None => remove_condition(&mut status, REPLICA_FAILURE),
    }
    status
}

/// The `ReplicaFailure` condition of the new ReplicaSet, else of any.
fn replica_failure(all: &[&ReplicaSet], new: Option<&ReplicaSet>) -> Option<DeploymentCondition> {
    let failure_of = |rs: &ReplicaSet| {
        let c = rs
            .status
            .as_ref()?
            .conditions
            .as_deref()?
            .iter()
            .find(|c| c.type_ == REPLICA_FAILURE)?;
        Some(DeploymentCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_update_time: c.last_transition_time.clone(),
            last_transition_time: c.last_transition_time.clone(),
        })
    };
    new.and_then(failure_of)
        .or_else(|| all.iter().find_map(|rs| failure_of(rs)))
}

/// When to look again at a Deployment whose status did not change, for its progress deadline
/// (Kubernetes' `requeueStuckDeployment`): `None` if it has none, is complete or has already
/// timed out.
pub(super) fn recheck_in(
    d: &Deployment,
    status: &DeploymentStatus,
    now: Timestamp,
) -> Option<Duration> {
    let deadline = progress_deadline(d)?;
    let c = get_condition(status, PROGRESSING)?;
    if complete(d, status) || c.reason.as_deref() == Some(TIMED_OUT) {
        return None;
    }
    let at = deadline_at(c.last_update_time.as_ref()?.0, deadline);
    let after = Duration::try_from(at.duration_since(now)).unwrap_or_default();
    // One second after the deadline, so the next sync finds it passed.
    Some(after + Duration::from_secs(1))
}

/// The `Progressing` condition a pause or resume sets, if one is due (Kubernetes'
/// `checkPausedConditions`): none without a progress deadline or after a timeout.
pub(super) fn paused_condition(d: &Deployment, now: Timestamp) -> Option<DeploymentCondition> {
    progress_deadline(d)?;
    let current = d
        .status
        .as_ref()
        .and_then(|s| get_condition(s, PROGRESSING));
    let reason = current.and_then(|c| c.reason.as_deref());
    if reason == Some(TIMED_OUT) {
        return None;
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    match (paused, reason == Some(PAUSED)) {
        (true, false) => Some(condition(
            PROGRESSING,
            "Unknown",
            PAUSED,
            "Deployment is paused".into(),
            now,
        )),
        (false, true) => Some(condition(
            PROGRESSING,
            "Unknown",
            RESUMED,
            "Deployment is resumed".into(),
            now,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::replicasets::testing::rs;
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;

    fn deployment(replicas: i32, status: DeploymentStatus) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.name = Some("web".into());
        d.metadata.generation = Some(2);
        d.spec = Some(DeploymentSpec {
            replicas: Some(replicas),
            progress_deadline_seconds: Some(60),
            ..Default::default()
        });
        d.status = Some(status);
        d
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).expect("valid")
    }

    fn reason(status: &DeploymentStatus, type_: &str) -> Option<String> {
        get_condition(status, type_).and_then(|c| c.reason.clone())
    }

    #[test]
    fn counts_should_come_from_the_replicasets() {
        let d = deployment(4, DeploymentStatus::default());
        let old = rs("old", 0, 2, 3, 2);
        let new = rs("new", 10, 3, 2, 1);
        let s = calculate(&d, &[&old, &new], Some(&new), t(0));
        assert_eq!(s.replicas, Some(5));
        assert_eq!(s.updated_replicas, Some(2));
        assert_eq!(s.available_replicas, Some(3));
        assert_eq!(s.unavailable_replicas, Some(2));
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(
            reason(&s, AVAILABLE).as_deref(),
            Some("MinimumReplicasAvailable"),
            "25% of 4 may be unavailable"
        );
    }

    #[test]
    fn progress_should_move_last_update_but_not_last_transition() {
        let mut before = DeploymentStatus::default();
        set_condition(
            &mut before,
            condition(PROGRESSING, "True", NEW_RS_CREATED, "x".into(), t(0)),
        );
        let d = deployment(2, before);
        let new = rs("new", 0, 2, 1, 1);
        let s = rollout(&d, &[&new], Some(&new), t(10));
        let c = get_condition(&s, PROGRESSING).expect("set");
        assert_eq!(c.reason.as_deref(), Some(RS_UPDATED));
        assert_eq!(c.last_update_time, Some(Time(t(10))));
        assert_eq!(c.last_transition_time, Some(Time(t(0))));
    }

    #[test]
    fn no_progress_past_the_deadline_should_time_out() {
        let mut before = DeploymentStatus {
            replicas: Some(1),
            updated_replicas: Some(1),
            ..Default::default()
        };
        set_condition(
            &mut before,
            condition(PROGRESSING, "True", NEW_RS_CREATED, "x".into(), t(0)),
        );
        let d = deployment(1, before);
        let new = rs("new", 0, 1, 1, 0);
        let s = rollout(&d, &[&new], Some(&new), t(30));
        assert_eq!(reason(&s, PROGRESSING).as_deref(), Some(NEW_RS_CREATED));
        assert_eq!(recheck_in(&d, &s, t(30)), Some(Duration::from_secs(31)));
        let s = rollout(&d, &[&new], Some(&new), t(61));
        let c = get_condition(&s, PROGRESSING).expect("set");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some(TIMED_OUT))
        );
        assert_eq!(recheck_in(&d, &s, t(61)), None);
    }

    #[test]
    fn a_complete_rollout_should_say_new_replicaset_available() {
        let d = deployment(2, DeploymentStatus::default());
        let new = rs("new", 0, 2, 2, 2);
        let s = rollout(&d, &[&new], Some(&new), t(0));
        assert_eq!(reason(&s, PROGRESSING).as_deref(), Some(NEW_RS_AVAILABLE));
        assert!(complete(&d, &s));
    }

    #[test]
    fn pause_and_resume_should_set_unknown_progress() {
        let mut d = deployment(1, DeploymentStatus::default());
        assert!(paused_condition(&d, t(0)).is_none());
        if let Some(s) = d.spec.as_mut() {
            s.paused = Some(true);
        }
        let c = paused_condition(&d, t(0)).expect("paused");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("Unknown", Some(PAUSED))
        );
        let mut status = DeploymentStatus::default();
        set_condition(&mut status, c);
        d.status = Some(status);
        assert!(paused_condition(&d, t(1)).is_none(), "already paused");
        if let Some(s) = d.spec.as_mut() {
            s.paused = Some(false);
        }
        let c = paused_condition(&d, t(2)).expect("resumed");
        assert_eq!(c.reason.as_deref(), Some(RESUMED));
    }
}
