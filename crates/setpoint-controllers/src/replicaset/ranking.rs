//! Which pods go first when a ReplicaSet scales down: the ones whose loss costs least, in
//! Kubernetes' `ActivePods` order —
//!
//! 1. not yet scheduled to a node before scheduled;
//! 2. `Pending` before `Unknown` before `Running`;
//! 3. not ready before ready;
//! 4. of two ready pods, the one ready for less time (an unknown ready time first);
//! 5. more container restarts before fewer;
//! 6. newer before older (an unknown creation time first).
//!
//! Kubernetes' pod-deletion-cost annotation and its "doubled up on one node" rank are not
//! (yet) keys here.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::pods::{is_ready, ready_since};

/// Orders `a` before `b` if `a` should be deleted first.
pub(super) fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    let scheduled = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    let phase = |p: &Pod| match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Unknown") => 1,
        Some("Running") => 2,
        // Pending, and anything unrecognised, ranks lowest (as in Kubernetes).
        _ => 0,
    };
    let restarts = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default()
            .iter()
            .map(|c| c.restart_count)
            .max()
            .unwrap_or(0)
    };
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    scheduled(a)
        .cmp(&scheduled(b))
        .then_with(|| phase(a).cmp(&phase(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| {
            if is_ready(a) && is_ready(b) {
                // Later (or unknown) ready time first: None ranks as the most recent.
                newest_first(ready_since(a), ready_since(b))
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| restarts(b).cmp(&restarts(a)))
        .then_with(|| newest_first(created(a), created(b)))
}

/// Orders later times first, an unknown time before any known one.
fn newest_first<T: Ord>(a: Option<T>, b: Option<T>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// The `count` pods of `pods` to delete first.
pub(super) fn pods_to_delete(pods: &[Arc<Pod>], count: usize) -> Vec<Arc<Pod>> {
    let mut ranked = pods.to_vec();
    ranked.sort_by(|a, b| deletion_order(a, b));
    ranked.truncate(count);
    ranked
}

#[cfg(test)]
mod tests {
    use super::super::pods::testing::*;
    use super::*;

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn rank(pods: Vec<Pod>) -> Vec<String> {
        let pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
        names(&pods_to_delete(&pods, pods.len()))
    }

    #[test]
    fn unscheduled_pods_should_go_before_scheduled_ones() {
        let scheduled = ready(on_node(pod("scheduled", "Running", 0), "n1"), 0);
        let unscheduled = ready(pod("unscheduled", "Running", -100), 0);
        assert_eq!(
            rank(vec![scheduled, unscheduled]),
            ["unscheduled", "scheduled"]
        );
    }

    #[test]
    fn pending_should_go_before_unknown_before_running() {
        let pods = vec![
            on_node(pod("running", "Running", 0), "n"),
            on_node(pod("unknown", "Unknown", 0), "n"),
            on_node(pod("pending", "Pending", 0), "n"),
        ];
        assert_eq!(rank(pods), ["pending", "unknown", "running"]);
    }

    #[test]
    fn not_ready_should_go_before_ready() {
        let pods = vec![
            ready(on_node(pod("ready", "Running", 10), "n"), 10),
            on_node(pod("not-ready", "Running", 0), "n"),
        ];
        assert_eq!(rank(pods), ["not-ready", "ready"]);
    }

    #[test]
    fn the_more_recently_ready_should_go_first() {
        let pods = vec![
            ready(on_node(pod("ready-long", "Running", 0), "n"), 5),
            ready(on_node(pod("ready-recently", "Running", 0), "n"), 50),
        ];
        assert_eq!(rank(pods), ["ready-recently", "ready-long"]);
    }

    #[test]
    fn more_restarts_should_go_before_fewer() {
        let pods = vec![
            restarted(on_node(pod("stable", "Running", 10), "n"), 0),
            restarted(on_node(pod("crashy", "Running", 0), "n"), 7),
        ];
        assert_eq!(rank(pods), ["crashy", "stable"]);
    }

    #[test]
    fn newer_should_go_before_older_all_else_equal() {
        let mut unknown_age = pod("unknown-age", "Pending", 0);
        unknown_age.metadata.creation_timestamp = None;
        let pods = vec![
            pod("old", "Pending", 0),
            pod("new", "Pending", 100),
            unknown_age,
            pod("middle", "Pending", 50),
        ];
        assert_eq!(rank(pods), ["unknown-age", "new", "middle", "old"]);
    }

    #[test]
    fn earlier_keys_should_outweigh_later_ones() {
        // An old unscheduled pod still goes before a new scheduled, not-ready one; a new ready
        // pod with restarts stays after an old not-ready one.
        let pods = vec![
            ready(
                restarted(on_node(pod("new-ready-crashy", "Running", 100), "n"), 9),
                100,
            ),
            on_node(pod("old-running-not-ready", "Running", 0), "n"),
            on_node(pod("new-pending", "Pending", 100), "n"),
            pod("old-unscheduled", "Pending", 0),
        ];
        assert_eq!(
            rank(pods),
            [
                "old-unscheduled",
                "new-pending",
                "old-running-not-ready",
                "new-ready-crashy"
            ]
        );
    }

    #[test]
    fn pods_to_delete_should_take_the_first_count() {
        let pods: Vec<Arc<Pod>> = [
            pod("a", "Pending", 0),
            pod("b", "Pending", 1),
            pod("c", "Pending", 2),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        assert_eq!(names(&pods_to_delete(&pods, 2)), ["c", "b"]);
    }
}
