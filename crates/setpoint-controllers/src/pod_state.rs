//! What the StatefulSet and DaemonSet loops read off a pod: finished, terminating, running and
//! ready, and available (ready for `minReadySeconds`) — or how long until it will be.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The pod's phase (`""` when unset).
pub(crate) fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether the pod has finished: phase `Failed` or `Succeeded`.
pub(crate) fn is_finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Failed" | "Succeeded")
}

/// Whether the pod is being deleted.
pub(crate) fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Since when the pod has been ready, if its `Ready` condition is `True` (the epoch when the
/// condition has no transition time).
fn ready_since(pod: &Pod) -> Option<Timestamp> {
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(
        condition
            .last_transition_time
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
    )
}

/// Whether the pod is `Running` with its `Ready` condition `True`.
pub(crate) fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && ready_since(pod).is_some()
}

/// A pod's availability at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Availability {
    /// Not running and ready.
    NotReady,
    /// Running and ready, available after this much longer.
    ReadyFor(Duration),
    /// Running and ready for at least `minReadySeconds`.
    Available,
}

/// The pod's availability at `now` under `min_ready`.
pub(crate) fn availability(pod: &Pod, min_ready: Duration, now: Timestamp) -> Availability {
    let Some(since) = ready_since(pod).filter(|_| phase(pod) == "Running") else {
        return Availability::NotReady;
    };
    if min_ready.is_zero() {
        return Availability::Available;
    }
    let min_ready = SignedDuration::try_from(min_ready).unwrap_or(SignedDuration::MAX);
    let at = since.checked_add(min_ready).unwrap_or(Timestamp::MAX);
    if at <= now {
        Availability::Available
    } else {
        Availability::ReadyFor(Duration::try_from(at.duration_since(now)).unwrap_or_default())
    }
}

/// `minReadySeconds` as a duration (negative counts as zero).
pub(crate) fn min_ready(seconds: Option<i32>) -> Duration {
    Duration::from_secs(u64::try_from(seconds.unwrap_or(0)).unwrap_or(0))
}

/// Whether the pod is available at `now` under `min_ready`.
pub(crate) fn is_available(pod: &Pod, min_ready: Duration, now: Timestamp) -> bool {
    availability(pod, min_ready, now) == Availability::Available
}

/// An int-or-percent field (`maxUnavailable`, `maxSurge`) scaled against `total`, percentages
/// rounded up (as kube-controller-manager does for these fields); garbage counts as 0.
pub(crate) fn int_or_percent(value: &IntOrString, total: usize) -> usize {
    match value {
        IntOrString::Int(n) => usize::try_from(*n).unwrap_or(0),
        IntOrString::String(s) => {
            let percent = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .unwrap_or(0);
            (percent.saturating_mul(total)).div_ceil(100)
        }
    }
}

/// The earliest of two optional waits.
pub(crate) fn sooner(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn pod(phase: &str, ready_at: Option<i64>) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready_at.map(|s| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(Timestamp::from_second(s).expect("valid"))),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn availability_should_wait_for_min_ready_seconds() {
        let now = Timestamp::from_second(100).expect("valid");
        assert_eq!(
            availability(&pod("Pending", Some(0)), Duration::ZERO, now),
            Availability::NotReady
        );
        assert_eq!(
            availability(&pod("Running", None), Duration::ZERO, now),
            Availability::NotReady
        );
        assert_eq!(
            availability(&pod("Running", Some(95)), Duration::from_secs(10), now),
            Availability::ReadyFor(Duration::from_secs(5))
        );
        assert!(is_available(
            &pod("Running", Some(80)),
            Duration::from_secs(10),
            now
        ));
        assert!(is_finished(&pod("Failed", None)));
        assert!(!is_finished(&pod("Running", None)));
    }

    #[test]
    fn int_or_percent_should_round_percentages_up() {
        assert_eq!(int_or_percent(&IntOrString::Int(3), 10), 3);
        assert_eq!(int_or_percent(&IntOrString::String("25%".into()), 10), 3);
        assert_eq!(int_or_percent(&IntOrString::String("junk".into()), 10), 0);
    }
}
