//! `endpoints.kubernetes.io/last-change-trigger-time`: when the earliest change that a write of
//! a Service's endpoints carries happened. Per Service, the tracker remembers each selected
//! pod's trigger time (its `Ready` condition's transition time) as of the last sync; a sync
//! reports the earliest trigger time among pods that are new or changed since, or the
//! Service's creation time on its first sync. Nothing changed: no time (the annotation is
//! cleared from what is written). Kept in memory, as kube keeps it; entries of Services gone
//! from the cache are pruned now and then.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use setpoint_runtime::ObjectKey;

/// The annotation.
pub(crate) const ANNOTATION: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// Syncs between two prunes.
const PRUNE_EVERY: u64 = 512;

/// Per-Service pod trigger times.
#[derive(Debug, Default)]
pub(crate) struct TriggerTimes {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    services: HashMap<ObjectKey, HashMap<String, Option<Timestamp>>>,
    syncs: u64,
}

/// The pod's trigger time: its `Ready` condition's last transition.
fn pod_time(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

impl TriggerTimes {
    /// Records the Service's pods and returns the trigger time of this sync, if any; `exists`
    /// says whether a Service is still there (for pruning).
    pub(crate) fn compute(
        &self,
        service: &Service,
        pods: &[Arc<Pod>],
        exists: impl Fn(&ObjectKey) -> bool,
    ) -> Option<Timestamp> {
        let key = ObjectKey::of(service);
        let mut inner = self.inner.lock();
        inner.syncs += 1;
        if inner.syncs.is_multiple_of(PRUNE_EVERY) {
            inner.services.retain(|k, _| exists(k));
        }
        let now: HashMap<String, Option<Timestamp>> = pods
            .iter()
            .map(|p| (p.metadata.name.clone().unwrap_or_default(), pod_time(p)))
            .collect();
        let earliest = match inner.services.get(&key) {
            None => service.metadata.creation_timestamp.as_ref().map(|t| t.0),
            Some(before) => now
                .iter()
                .filter(|(name, time)| before.get(*name) != Some(*time))
                .filter_map(|(_, time)| *time)
                .min(),
        };
        inner.services.insert(key, now);
        earliest
    }
}

/// The annotation's value for `time`.
pub(crate) fn format(time: Timestamp) -> String {
    time.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready_at: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name}, "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": ready_at}]}}),
            )
            .expect("pod"),
        )
    }

    #[test]
    fn the_first_sync_should_report_creation_then_only_changed_pods() {
        let service: Service = serde_json::from_value(json!({"metadata": {
            "name": "s", "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"}}))
        .expect("service");
        let cache = |_: &ObjectKey| true;
        let times = TriggerTimes::default();
        let a = pod("a", "2026-01-01T00:01:00Z");
        let first = times.compute(&service, std::slice::from_ref(&a), cache);
        assert_eq!(first.map(format).as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(
            times.compute(&service, std::slice::from_ref(&a), cache),
            None
        );
        let b = pod("b", "2026-01-01T00:03:00Z");
        let a2 = pod("a", "2026-01-01T00:02:00Z");
        let next = times.compute(&service, &[a2, b], cache);
        assert_eq!(next.map(format).as_deref(), Some("2026-01-01T00:02:00Z"));
    }
}
