//! Which taints a node should carry given its conditions (kube's `doNoScheduleTaintingPass`
//! and taint-based eviction's NoExecute taints), and whether a pod tolerates a node's
//! `NoExecute` taints — and until when.

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The node is not ready (`Ready=False`).
pub(super) const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node controller lost contact with the node (`Ready=Unknown`).
pub(super) const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `spec.unschedulable` is set (cordoned).
const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Effect: no new pods that do not tolerate it.
pub(super) const NO_SCHEDULE: &str = "NoSchedule";
/// Effect: pods that do not tolerate it are evicted.
pub(super) const NO_EXECUTE: &str = "NoExecute";

/// Condition → `NoSchedule` taint, for conditions other than `Ready`: `(type, status, key)`.
const CONDITION_TAINTS: &[(&str, &str, &str)] = &[
    (
        "MemoryPressure",
        "True",
        "node.kubernetes.io/memory-pressure",
    ),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
    (
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
    ),
];

/// Every taint key this loop manages (taints with other keys are never touched).
const MANAGED: &[&str] = &[
    NOT_READY,
    UNREACHABLE,
    UNSCHEDULABLE,
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
];

/// The status of the node's condition `type_`, if it reports one.
pub(super) fn condition_status<'a>(node: &'a Node, type_: &str) -> Option<&'a str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// The `(key, effect)` pairs of the managed taints `node` should carry now.
fn wanted(node: &Node) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    match condition_status(node, "Ready") {
        Some("False") => out.extend([(NOT_READY, NO_SCHEDULE), (NOT_READY, NO_EXECUTE)]),
        Some("Unknown") => out.extend([(UNREACHABLE, NO_SCHEDULE), (UNREACHABLE, NO_EXECUTE)]),
        // A node that never reported is not ready as far as anyone can tell, but kube
        // leaves it alone until its grace period marks it Unknown.
        _ => {}
    }
    for (type_, status, key) in CONDITION_TAINTS {
        if condition_status(node, type_) == Some(*status) {
            out.push((key, NO_SCHEDULE));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        out.push((UNSCHEDULABLE, NO_SCHEDULE));
    }
    out
}

/// The taints `node` should have: its unmanaged taints unchanged, then the managed ones its
/// conditions call for — a managed taint it already has keeps its `timeAdded`; a new
/// `NoExecute` one gets `now`. `None` if that is what it has already.
pub(super) fn reconciled_taints(node: &Node, now: &Time) -> Option<Vec<Taint>> {
    let current: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let mut next: Vec<Taint> = current
        .iter()
        .filter(|t| !MANAGED.contains(&t.key.as_str()))
        .cloned()
        .collect();
    for (key, effect) in wanted(node) {
        let existing = current
            .iter()
            .find(|t| t.key == key && t.effect == effect)
            .cloned();
        next.push(existing.unwrap_or_else(|| Taint {
            key: key.to_owned(),
            effect: effect.to_owned(),
            value: None,
            time_added: (effect == NO_EXECUTE).then(|| now.clone()),
        }));
    }
    let same = next.len() == current.len() && next.iter().all(|t| current.contains(t));
    (!same).then_some(next)
}

/// Whether `toleration` tolerates `taint` (kube's `ToleratesTaint`): same effect (or any), and
/// `Exists` with the same key (or no key: everything), or `Equal` (the default) with the same
/// key and value.
pub(super) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// What taint-based eviction does with a pod on a node.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Eviction {
    /// The node has no `NoExecute` taint, or the pod tolerates all of them indefinitely.
    Keep,
    /// Some `NoExecute` taint is not tolerated: delete the pod now.
    Now,
    /// Every `NoExecute` taint is tolerated, the shortest for this many seconds after the
    /// taint was added: delete the pod at that wall-clock time (Unix seconds).
    At(i64),
}

/// What to do with a pod tolerating `tolerations` on a node tainted `taints`: as kube's taint
/// eviction controller, the pod may stay as long as its shortest `tolerationSeconds` among the
/// tolerations used, counted from each taint's `timeAdded` (or `now_secs` if unset); a
/// negative `tolerationSeconds` counts as zero.
pub(super) fn eviction(taints: &[Taint], tolerations: &[Toleration], now_secs: i64) -> Eviction {
    let mut deadline: Option<i64> = None;
    for taint in taints.iter().filter(|t| t.effect == NO_EXECUTE) {
        let used: Vec<&Toleration> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if used.is_empty() {
            return Eviction::Now;
        }
        // A toleration without seconds tolerates forever; the taint then sets no deadline
        // unless another toleration of it has seconds (kube takes the minimum of those).
        let seconds = used
            .iter()
            .filter_map(|t| t.toleration_seconds)
            .min()
            .map(|s| s.max(0));
        if let Some(seconds) = seconds {
            let added = taint
                .time_added
                .as_ref()
                .map_or(now_secs, |t| t.0.as_second());
            let at = added.saturating_add(seconds);
            deadline = Some(deadline.map_or(at, |d| d.min(at)));
        }
    }
    match deadline {
        None => Eviction::Keep,
        Some(at) if at <= now_secs => Eviction::Now,
        Some(at) => Eviction::At(at),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    use super::*;

    fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid"))
    }

    fn node(ready: &str, taints: Vec<Taint>) -> Node {
        Node {
            spec: Some(NodeSpec {
                taints: Some(taints),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".to_owned(),
                    status: ready.to_owned(),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    fn taint(key: &str, effect: &str, added: Option<i64>) -> Taint {
        Taint {
            key: key.to_owned(),
            effect: effect.to_owned(),
            value: None,
            time_added: added.map(time),
        }
    }

    fn toleration(key: &str, op: &str, effect: Option<&str>, secs: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.to_owned()),
            operator: Some(op.to_owned()),
            effect: effect.map(str::to_owned),
            toleration_seconds: secs,
            value: None,
        }
    }

    #[test]
    fn unknown_node_should_get_unreachable_taints_and_keep_others() {
        let custom = taint("team", NO_SCHEDULE, None);
        let n = node("Unknown", vec![custom.clone()]);
        let taints = reconciled_taints(&n, &time(100)).expect("changes");
        assert_eq!(taints[0], custom);
        assert!(taints.contains(&taint(UNREACHABLE, NO_SCHEDULE, None)));
        assert!(taints.contains(&taint(UNREACHABLE, NO_EXECUTE, Some(100))));
        assert_eq!(taints.len(), 3);
    }

    #[test]
    fn ready_node_should_lose_managed_taints_and_settled_nodes_need_nothing() {
        let n = node("True", vec![taint(NOT_READY, NO_EXECUTE, Some(5))]);
        assert_eq!(reconciled_taints(&n, &time(100)), Some(vec![]));
        let settled = node(
            "False",
            vec![
                taint(NOT_READY, NO_SCHEDULE, None),
                taint(NOT_READY, NO_EXECUTE, Some(5)),
            ],
        );
        assert_eq!(reconciled_taints(&settled, &time(100)), None);
    }

    #[test]
    fn not_ready_should_replace_unreachable() {
        let n = node("False", vec![taint(UNREACHABLE, NO_EXECUTE, Some(5))]);
        let taints = reconciled_taints(&n, &time(100)).expect("changes");
        assert!(taints.iter().all(|t| t.key == NOT_READY));
        assert!(taints.contains(&taint(NOT_READY, NO_EXECUTE, Some(100))));
    }

    #[test]
    fn tolerations_should_match_as_kube_does() {
        let t = Taint {
            value: Some("v".to_owned()),
            ..taint("k", NO_EXECUTE, None)
        };
        assert!(tolerates(&toleration("k", "Exists", None, None), &t));
        assert!(tolerates(&toleration("", "Exists", None, None), &t));
        assert!(!tolerates(
            &toleration("k", "Exists", Some(NO_SCHEDULE), None),
            &t
        ));
        let mut equal = toleration("k", "Equal", Some(NO_EXECUTE), None);
        assert!(!tolerates(&equal, &t));
        equal.value = Some("v".to_owned());
        assert!(tolerates(&equal, &t));
    }

    #[test]
    fn eviction_should_follow_the_shortest_toleration() {
        let taints = [
            taint(UNREACHABLE, NO_EXECUTE, Some(1_000)),
            taint(UNREACHABLE, NO_SCHEDULE, None),
        ];
        assert_eq!(eviction(&taints, &[], 1_000), Eviction::Now);
        let forever = [toleration(UNREACHABLE, "Exists", Some(NO_EXECUTE), None)];
        assert_eq!(eviction(&taints, &forever, 5_000), Eviction::Keep);
        let five_min = [toleration(
            UNREACHABLE,
            "Exists",
            Some(NO_EXECUTE),
            Some(300),
        )];
        assert_eq!(eviction(&taints, &five_min, 1_010), Eviction::At(1_300));
        assert_eq!(eviction(&taints, &five_min, 1_300), Eviction::Now);
        let both = [forever[0].clone(), five_min[0].clone()];
        assert_eq!(eviction(&taints, &both, 1_010), Eviction::At(1_300));
        assert_eq!(eviction(&[], &[], 0), Eviction::Keep);
    }
}
