//! What one sync of a DaemonSet does to its pods, decided from a snapshot (kube-controller-
//! manager's `manage` and `rollingUpdate`), without writing anything:
//!
//! - a node that should run a pod and has none gets one; a node that may not keep its pods
//!   loses them; a failed pod is deleted (and replaced by a later sync); surplus pods on a
//!   node are deleted, the oldest kept (with `maxSurge`, the oldest of each revision); pods on
//!   nodes that no longer exist are deleted;
//! - `RollingUpdate` without surge: outdated pods that are not available are deleted at once,
//!   available ones while fewer than `maxUnavailable` nodes are unavailable;
//! - `RollingUpdate` with `maxSurge`: an updated pod is created beside an available outdated
//!   one (at most `maxSurge` in flight), and the outdated one is deleted once the updated one
//!   is available; an outdated pod that is not available is replaced at once.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use super::placement::{placement, Placement};
use crate::history::CONTROLLER_REVISION_HASH;
use crate::pod_state::{
    availability, int_or_percent, is_available, is_terminating, min_ready, phase, sooner,
    Availability,
};

/// The writes one sync makes.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// Nodes to create a pod for.
    pub(super) create: Vec<String>,
    /// Pods to delete.
    pub(super) delete: Vec<Arc<Pod>>,
    /// When a ready pod becomes available (sync again then).
    pub(super) requeue_after: Option<Duration>,
}

/// Whether `pod` was made from revision `hash`.
pub(super) fn is_updated(pod: &Pod, hash: &str) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
        .is_some_and(|h| h == hash)
}

/// Oldest first (by creation time, then name).
pub(super) fn by_age(a: &Arc<Pod>, b: &Arc<Pod>) -> std::cmp::Ordering {
    a.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `(maxUnavailable, maxSurge)` scaled to `desired` nodes, or `None` under `OnDelete`. When
/// both come out 0, `maxUnavailable` is 1 (as Kubernetes does).
pub(super) fn rolling(ds: &DaemonSet, desired: usize) -> Option<(usize, usize)> {
    let strategy = ds.spec.as_ref()?.update_strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        return None;
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let surge = rolling
        .and_then(|r| r.max_surge.as_ref())
        .map_or(0, |v| int_or_percent(v, desired));
    let unavailable = rolling
        .and_then(|r| r.max_unavailable.as_ref())
        .map_or(1, |v| int_or_percent(v, desired));
    Some(if surge == 0 && unavailable == 0 {
        (1, 0)
    } else {
        (unavailable, surge)
    })
}

/// Plans one sync: `template` is the DaemonSet's pod (see `placement::template_pod`), `pods`
/// its claimed pods by node name, `hash` the update revision's hash.
pub(super) fn plan(
    ds: &DaemonSet,
    template: &Pod,
    nodes: &[Arc<Node>],
    pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    now: Timestamp,
) -> Plan {
    let min_ready = min_ready(ds.spec.as_ref().and_then(|s| s.min_ready_seconds));
    let mut plan = Plan::default();
    let empty = Vec::new();
    let mut eligible: Vec<(&str, Vec<Arc<Pod>>)> = Vec::new();
    let mut surge_enabled = false;
    let desired = nodes
        .iter()
        .filter(|n| placement(template, n).should_run)
        .count();
    let strategy = rolling(ds, desired);
    if let Some((_, surge)) = strategy {
        surge_enabled = surge > 0;
    }
    let known: HashSet<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    for (node, on_node) in pods {
        if !known.contains(node.as_str()) {
            plan.delete
                .extend(on_node.iter().filter(|p| !is_terminating(p)).cloned());
        }
    }
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let on_node = pods.get(name).unwrap_or(&empty);
        let Placement {
            should_run,
            may_stay,
        } = placement(template, node);
        if !may_stay {
            plan.delete
                .extend(on_node.iter().filter(|p| !is_terminating(p)).cloned());
            continue;
        }
        if should_run && on_node.is_empty() {
            plan.create.push(name.to_owned());
            // A node about to get its first pod is unavailable for the rolling update.
            eligible.push((name, Vec::new()));
            continue;
        }
        let mut running: Vec<Arc<Pod>> = Vec::new();
        for pod in on_node.iter().filter(|p| !is_terminating(p)) {
            if phase(pod) == "Failed" {
                plan.delete.push(pod.clone());
            } else {
                running.push(pod.clone());
            }
        }
        running.sort_by(by_age);
        if running.len() > 1 {
            let (mut kept_new, mut kept_old) = (false, false);
            for pod in &running {
                let keep = if surge_enabled {
                    let slot = if is_updated(pod, hash) {
                        &mut kept_new
                    } else {
                        &mut kept_old
                    };
                    !std::mem::replace(slot, true)
                } else {
                    !std::mem::replace(&mut kept_old, true)
                };
                if !keep {
                    plan.delete.push(pod.clone());
                }
            }
            running.retain(|p| !plan.delete.iter().any(|d| Arc::ptr_eq(d, p)));
        }
        for pod in &running {
            if let Availability::ReadyFor(wait) = availability(pod, min_ready, now) {
                plan.requeue_after = sooner(plan.requeue_after, Some(wait));
            }
        }
        if should_run {
            eligible.push((name, running));
        }
    }
    if let Some((max_unavailable, max_surge)) = strategy {
        roll(
            &mut plan,
            &eligible,
            hash,
            min_ready,
            now,
            max_unavailable,
            max_surge,
        );
    }
    plan
}

/// Adds the rolling update's writes to `plan`. `eligible` are the nodes that should run a pod,
/// with their live pods (at most one per revision once `plan`'s deletes are made).
fn roll(
    plan: &mut Plan,
    eligible: &[(&str, Vec<Arc<Pod>>)],
    hash: &str,
    min_ready: Duration,
    now: Timestamp,
    max_unavailable: usize,
    max_surge: usize,
) {
    let mut unavailable = 0;
    let mut candidates = Vec::new();
    let mut surge_in_flight = 0;
    let mut surge_candidates = Vec::new();
    for (node, pods) in eligible {
        let new = pods.iter().find(|p| is_updated(p, hash));
        let old = pods.iter().find(|p| !is_updated(p, hash));
        match (old, new) {
            (None, None) => unavailable += 1,
            (None, Some(new)) => {
                if !is_available(new, min_ready, now) {
                    unavailable += 1;
                }
            }
            (Some(old), None) => {
                if !is_available(old, min_ready, now) {
                    // Nothing to lose: replace it now.
                    unavailable += 1;
                    if max_surge > 0 {
                        plan.create.push((*node).to_owned());
                    } else {
                        plan.delete.push(old.clone());
                    }
                } else if max_surge > 0 {
                    surge_candidates.push(*node);
                } else {
                    candidates.push(old.clone());
                }
            }
            (Some(old), Some(new)) => {
                if is_available(new, min_ready, now) {
                    plan.delete.push(old.clone());
                } else {
                    surge_in_flight += 1;
                }
            }
        }
    }
    if max_surge > 0 {
        let room = max_surge.saturating_sub(surge_in_flight);
        plan.create
            .extend(surge_candidates.into_iter().take(room).map(str::to_owned));
    } else {
        let room = max_unavailable.saturating_sub(unavailable);
        plan.delete.extend(candidates.into_iter().take(room));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
    };
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn ds(max_unavailable: i32, max_surge: i32) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                name: Some("agent".into()),
                ..Default::default()
            },
            spec: Some(DaemonSetSpec {
                update_strategy: Some(DaemonSetUpdateStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDaemonSet {
                        max_unavailable: Some(IntOrString::Int(max_unavailable)),
                        max_surge: Some(IntOrString::Int(max_surge)),
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn node(name: &str) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn pod(name: &str, hash: &str, ready: bool) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(CONTROLLER_REVISION_HASH.to_owned(), hash.to_owned())].into()),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: ready.then(|| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        })
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        let mut n: Vec<String> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn plan_should_create_on_empty_nodes_and_delete_on_vanished_ones() {
        let d = ds(1, 0);
        let template = super::super::placement::template_pod(&d, "new");
        let pods = BTreeMap::from([
            ("n1".to_owned(), vec![pod("a", "new", true)]),
            ("gone".to_owned(), vec![pod("b", "new", true)]),
        ]);
        let p = plan(
            &d,
            &template,
            &[node("n1"), node("n2")],
            &pods,
            "new",
            Timestamp::now(),
        );
        assert_eq!(p.create, ["n2"]);
        assert_eq!(names(&p.delete), ["b"]);
    }

    #[test]
    fn rolling_update_should_respect_max_unavailable() {
        let d = ds(2, 0);
        let template = super::super::placement::template_pod(&d, "new");
        let nodes: Vec<_> = (1..=4).map(|i| node(&format!("n{i}"))).collect();
        let pods = BTreeMap::from([
            ("n1".to_owned(), vec![pod("p1", "old", true)]),
            ("n2".to_owned(), vec![pod("p2", "old", true)]),
            ("n3".to_owned(), vec![pod("p3", "old", false)]),
            ("n4".to_owned(), vec![pod("p4", "new", true)]),
        ]);
        let p = plan(&d, &template, &nodes, &pods, "new", Timestamp::now());
        // p3 is unavailable anyway (deleted at once, and uses one of the two); one more goes.
        assert_eq!(names(&p.delete), ["p1", "p3"]);
        assert!(p.create.is_empty());
    }

    #[test]
    fn a_node_without_a_pod_should_count_as_unavailable() {
        // Regression: an empty node was left out of the count, so a sync recreating one
        // node's pod also deleted another node's, two unavailable under maxUnavailable 1.
        let d = ds(1, 0);
        let template = super::super::placement::template_pod(&d, "new");
        let pods = BTreeMap::from([("n2".to_owned(), vec![pod("p2", "old", true)])]);
        let p = plan(
            &d,
            &template,
            &[node("n1"), node("n2")],
            &pods,
            "new",
            Timestamp::now(),
        );
        assert_eq!(p.create, ["n1"]);
        assert!(p.delete.is_empty());
    }

    #[test]
    fn surge_should_create_first_and_delete_the_old_pod_once_the_new_is_available() {
        let d = ds(0, 1);
        let template = super::super::placement::template_pod(&d, "new");
        let nodes: Vec<_> = (1..=3).map(|i| node(&format!("n{i}"))).collect();
        let pods = BTreeMap::from([
            (
                "n1".to_owned(),
                vec![pod("o1", "old", true), pod("w1", "new", true)],
            ),
            ("n2".to_owned(), vec![pod("o2", "old", true)]),
            ("n3".to_owned(), vec![pod("o3", "old", true)]),
        ]);
        let p = plan(&d, &template, &nodes, &pods, "new", Timestamp::now());
        assert_eq!(names(&p.delete), ["o1"]);
        assert_eq!(p.create, ["n2"], "one surge pod at a time");
        let pods = BTreeMap::from([
            ("n1".to_owned(), vec![pod("w1", "new", true)]),
            (
                "n2".to_owned(),
                vec![pod("o2", "old", true), pod("w2", "new", false)],
            ),
            ("n3".to_owned(), vec![pod("o3", "old", true)]),
        ]);
        let p = plan(&d, &template, &nodes, &pods, "new", Timestamp::now());
        assert!(p.delete.is_empty(), "w2 is not available yet");
        assert!(p.create.is_empty(), "the surge budget is in use");
    }
}
