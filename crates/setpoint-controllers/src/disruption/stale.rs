//! Stale `DisruptionTarget` conditions: a pod the eviction API marked `DisruptionTarget=True`
//! but that was never deleted (the delete failed, or a budget refused after the mark) gets the
//! condition set to `False` once it has been true for [`STALE_TIMEOUT`], as
//! kube-controller-manager's disruption controller does. Conditions the kubelet set
//! (`TerminationByKubelet`) and those of finished or terminating pods are left alone.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use setpoint_runtime::{Action, Client};

/// How long a `DisruptionTarget` condition may stay true on a pod that is not terminating.
pub(crate) const STALE_TIMEOUT: Duration = Duration::from_secs(120);

/// The condition.
const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// Why a clean-up failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("clearing the DisruptionTarget condition of pod {pod}")]
pub(crate) struct ClearFailed {
    pod: String,
    #[source]
    source: kube::Error,
}

/// The pod's `DisruptionTarget` condition if it may go stale: true, not the kubelet's, on a
/// pod neither finished nor terminating.
fn candidate(pod: &Pod) -> Option<&PodCondition> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    status.conditions.as_ref()?.iter().find(|c| {
        c.type_ == DISRUPTION_TARGET
            && c.status == "True"
            && c.reason.as_deref() != Some("TerminationByKubelet")
    })
}

/// Whether the pod should be looked at (the controller's predicate).
pub(crate) fn has_candidate(pod: &Pod) -> bool {
    candidate(pod).is_some()
}

/// How long until the pod's condition is stale at `now` (zero: it is), `None` if it has none.
fn stale_in(pod: &Pod, now: Timestamp) -> Option<Duration> {
    let c = candidate(pod)?;
    let since = c.last_transition_time.as_ref().map_or(now, |t| t.0);
    let age = now.duration_since(since);
    let age = Duration::try_from(age).unwrap_or(Duration::ZERO);
    Some(STALE_TIMEOUT.saturating_sub(age))
}

/// One pass over one pod: wait until its condition is stale, then set it to `False`.
pub(crate) async fn reconcile(pod: Arc<Pod>, client: Arc<Client>) -> Result<Action, ClearFailed> {
    let now = Timestamp::now();
    match stale_in(&pod, now) {
        None => Ok(Action::await_change()),
        Some(wait) if !wait.is_zero() => Ok(Action::requeue(wait)),
        Some(_) => {
            let mut next = (*pod).clone();
            if let Some(conditions) = next.status.as_mut().and_then(|s| s.conditions.as_mut()) {
                for c in conditions
                    .iter_mut()
                    .filter(|c| c.type_ == DISRUPTION_TARGET)
                {
                    *c = PodCondition {
                        type_: DISRUPTION_TARGET.to_owned(),
                        status: "False".to_owned(),
                        last_transition_time: Some(Time(now)),
                        ..PodCondition::default()
                    };
                }
            }
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            client
                .namespaced_api::<Pod>(&namespace)
                .replace_status(&name, &PostParams::default(), &next)
                .await
                .map_err(|source| ClearFailed {
                    pod: format!("{namespace}/{name}"),
                    source,
                })?;
            tracing::info!(pod = %format!("{namespace}/{name}"), "reset stale DisruptionTarget condition to False");
            Ok(Action::await_change())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(reason: &str, since: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"phase": phase,
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": reason,
                            "lastTransitionTime": since}]}}))
        .unwrap()
    }

    #[test]
    fn a_condition_should_go_stale_after_the_timeout_unless_the_kubelet_set_it() {
        let now: Timestamp = "2026-01-01T00:03:00Z".parse().unwrap();
        let p = pod("EvictionByEvictionAPI", "2026-01-01T00:00:00Z", "Running");
        assert_eq!(stale_in(&p, now), Some(Duration::ZERO));
        let p = pod("EvictionByEvictionAPI", "2026-01-01T00:02:00Z", "Running");
        assert_eq!(stale_in(&p, now), Some(Duration::from_secs(60)));
        let p = pod("TerminationByKubelet", "2026-01-01T00:00:00Z", "Running");
        assert_eq!(stale_in(&p, now), None);
        let p = pod("EvictionByEvictionAPI", "2026-01-01T00:00:00Z", "Failed");
        assert_eq!(stale_in(&p, now), None);
    }
}
