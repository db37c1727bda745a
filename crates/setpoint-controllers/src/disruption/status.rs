//! A PodDisruptionBudget's status from its pods, as kube-controller-manager computes it:
//! `currentHealthy` (ready pods, neither terminating nor recorded as being evicted),
//! `desiredHealthy`, `expectedPods`, `disruptionsAllowed`, `disruptedPods` (the eviction
//! handler's records, dropped once the pod is terminating, gone, or not deleted within
//! [`DELETION_TIMEOUT`]), `observedGeneration` and the `DisruptionAllowed` condition.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// How long after an eviction was admitted its pod may take to be marked for deletion before
/// the budget counts it again (kube's `DeletionTimeout`).
pub(crate) const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The condition the status carries.
pub(crate) const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// Whether the pod's `Ready` condition is `True`.
pub(crate) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// When an entry recorded at `at` expires.
fn expiry(at: &Time) -> Timestamp {
    at.0.checked_add(DELETION_TIMEOUT).unwrap_or(at.0)
}

/// The entries of `recorded` still pending among `pods` at `now`, and the earliest time one of
/// them expires (when the budget must be looked at again).
pub(crate) fn disrupted_pods(
    recorded: Option<&BTreeMap<String, Time>>,
    pods: &[Arc<Pod>],
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let Some(recorded) = recorded else {
        return (kept, recheck);
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = recorded.get(&name) else {
            continue;
        };
        let expires = expiry(at);
        if expires < now {
            tracing::info!(pod = %name, "pod was expected to be deleted but it wasn't");
            continue;
        }
        recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
        kept.insert(name, at.clone());
    }
    (kept, recheck)
}

/// The ready pods that are neither terminating nor being evicted.
pub(crate) fn healthy(
    pods: &[Arc<Pod>],
    disrupted: &BTreeMap<String, Time>,
    now: Timestamp,
) -> i32 {
    let count = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            disrupted.get(name).is_none_or(|at| expiry(at) <= now)
        })
        .filter(|p| is_ready(p))
        .count();
    i32::try_from(count).unwrap_or(i32::MAX)
}

/// The counts a sync found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) current_healthy: i32,
    pub(crate) desired_healthy: i32,
    pub(crate) expected: i32,
}

/// The status `pdb` should have with `counts` and `disrupted`, or `None` when it has it.
pub(crate) fn next(
    pdb: &PodDisruptionBudget,
    counts: Counts,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    let mut allowed = counts.current_healthy - counts.desired_healthy;
    if counts.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let generation = pdb.metadata.generation;
    let old = pdb.status.clone().unwrap_or_default();
    let up_to_date = old.current_healthy == counts.current_healthy
        && old.desired_healthy == counts.desired_healthy
        && old.expected_pods == counts.expected
        && old.disruptions_allowed == allowed
        && old.disrupted_pods.clone().unwrap_or_default() == disrupted
        && old.observed_generation == generation
        && conditions_up_to_date(&old, generation);
    if up_to_date {
        return None;
    }
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: counts.current_healthy,
        desired_healthy: counts.desired_healthy,
        expected_pods: counts.expected,
        disruptions_allowed: allowed,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: generation,
        conditions: old.conditions.clone(),
    };
    let (state, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    set_condition(&mut status, state, reason, "", now);
    Some(status)
}

/// Whether the `DisruptionAllowed` condition agrees with the counts and the generation.
fn conditions_up_to_date(status: &PodDisruptionBudgetStatus, generation: Option<i64>) -> bool {
    let Some(c) = status
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.type_ == DISRUPTION_ALLOWED))
    else {
        return false;
    };
    if status.observed_generation != generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        c.status == "True" && c.reason == "SufficientPods"
    } else {
        c.status == "False" && c.reason == "InsufficientPods"
    }
}

/// Sets `DisruptionAllowed` to `state` for `reason`; its transition time moves only when the
/// state changes.
pub(crate) fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    state: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let since = conditions
        .iter()
        .find(|c| c.type_ == DISRUPTION_ALLOWED && c.status == state)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    conditions.retain(|c| c.type_ != DISRUPTION_ALLOWED);
    conditions.push(Condition {
        type_: DISRUPTION_ALLOWED.to_owned(),
        status: state.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: status.observed_generation,
        last_transition_time: since,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool, deleting: bool) -> Arc<Pod> {
        let mut p = json!({"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(p).unwrap())
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn disrupted_entries_should_expire_or_go_with_their_pod() {
        let now = at(1_000_000);
        let recorded: BTreeMap<String, Time> = [
            ("fresh".to_owned(), Time(at(1_000_000 - 10))),
            ("old".to_owned(), Time(at(1_000_000 - 300))),
            ("going".to_owned(), Time(at(1_000_000 - 10))),
            ("gone".to_owned(), Time(at(1_000_000 - 10))),
        ]
        .into();
        let pods = vec![
            pod("fresh", true, false),
            pod("old", true, false),
            pod("going", true, true),
            pod("other", true, false),
        ];
        let (kept, recheck) = disrupted_pods(Some(&recorded), &pods, now);
        assert_eq!(kept.keys().collect::<Vec<_>>(), vec!["fresh"]);
        assert_eq!(recheck, Some(at(1_000_000 - 10 + 120)));
        // fresh is being evicted, going is terminating: old and other count.
        assert_eq!(healthy(&pods, &kept, now), 2);
    }

    #[test]
    fn the_status_should_allow_what_is_healthy_beyond_the_desired() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "b", "generation": 2}}))
        .unwrap();
        let counts = Counts {
            current_healthy: 3,
            desired_healthy: 2,
            expected: 3,
        };
        let status = next(&pdb, counts, BTreeMap::new(), at(10)).unwrap();
        assert_eq!(status.disruptions_allowed, 1);
        assert_eq!(status.observed_generation, Some(2));
        let c = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "SufficientPods")
        );
        let mut synced = pdb.clone();
        synced.status = Some(status);
        assert_eq!(next(&synced, counts, BTreeMap::new(), at(20)), None);
        // No expected pods: nothing may be disrupted.
        let none = Counts {
            current_healthy: 3,
            desired_healthy: 0,
            expected: 0,
        };
        let status = next(&synced, none, BTreeMap::new(), at(30)).unwrap();
        assert_eq!(status.disruptions_allowed, 0);
        let c = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "InsufficientPods")
        );
        assert_eq!(c.last_transition_time, Time(at(30)));
    }
}
