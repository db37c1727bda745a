//! Filters: whether a pod may run on a node, and if not, why ([`Reason`]), in kube-scheduler's
//! words so `kubectl describe pod` reads the same. Checks run in kube's plugin order and stop at
//! the first that fails, except the resource check, which reports every resource short:
//! `Ready` condition (as the `not-ready`/`unreachable` taints kube's node lifecycle would
//! add), cordon (`NodeUnschedulable`), taints (`TaintToleration`), node selector
//! and required node affinity (`NodeAffinity`), requests (`NodeResourcesFit`).
//!
//! [`diagnosis`] turns the reasons of every node into kube's message, e.g. "0/3 nodes are
//! available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.".

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use super::node_info::{NodeFacts, NodeInfo, PodInfo, Readiness};
use super::resources::{CPU, EPHEMERAL_STORAGE, MEMORY};

/// The taint a cordoned node is treated as having: a pod tolerating it may go there.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
/// The taint a `Ready=False` node is treated as having (kube's node lifecycle adds it).
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The taint a `Ready=Unknown` node is treated as having.
const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Why a node cannot take a pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Reason {
    /// `Ready` is not `True`.
    NotReady,
    /// `spec.unschedulable` and the pod does not tolerate it.
    Cordoned,
    /// A `NoSchedule`/`NoExecute` taint the pod does not tolerate (the first such).
    UntoleratedTaint {
        /// The taint's key.
        key: String,
        /// The taint's value.
        value: String,
    },
    /// `nodeSelector` or required node affinity does not match.
    NodeAffinity,
    /// The node affinity of a bound PersistentVolume of the pod does not match.
    VolumeNodeAffinity,
    /// The node would exceed `allocatable.pods`.
    TooManyPods,
    /// The node lacks room for the request of this resource.
    Insufficient(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NotReady => f.write_str("node(s) were not ready"),
            Reason::Cordoned => f.write_str("node(s) were unschedulable"),
            Reason::UntoleratedTaint { key, value } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Reason::VolumeNodeAffinity => f.write_str("node(s) had volume node affinity conflict"),
            Reason::NodeAffinity => {
                f.write_str("node(s) didn't match Pod's node affinity/selector")
            }
            Reason::TooManyPods => f.write_str("Too many pods"),
            Reason::Insufficient(resource) => write!(f, "Insufficient {resource}"),
        }
    }
}

/// Why `node` cannot take `pod`; empty if it can.
pub(super) fn filter(node: &NodeInfo, facts: &NodeFacts, pod: &PodInfo) -> Vec<Reason> {
    let tolerations = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let readiness_taint = match facts.readiness {
        Readiness::Ready => None,
        Readiness::NotReady => Some(NOT_READY_TAINT),
        Readiness::Unknown => Some(UNREACHABLE_TAINT),
    };
    if readiness_taint.is_some_and(|t| !tolerates_no_schedule(tolerations, t)) {
        return vec![Reason::NotReady];
    }
    if facts.cordoned && !tolerates_no_schedule(tolerations, UNSCHEDULABLE_TAINT) {
        return vec![Reason::Cordoned];
    }
    if let Some(taint) = untolerated_taint(&facts.object, tolerations) {
        return vec![Reason::UntoleratedTaint {
            key: taint.key.clone(),
            value: taint.value.clone().unwrap_or_default(),
        }];
    }
    if !matches_node_selection(&pod.pod, &facts.object) {
        return vec![Reason::NodeAffinity];
    }
    insufficient(node, facts, pod)
}

/// Whether the tolerations allow the `NoSchedule` taint `key`: kube treats a cordoned node as
/// tainted `node.kubernetes.io/unschedulable`, and its node lifecycle taints nodes that are not
/// ready `node.kubernetes.io/not-ready` or `…/unreachable` (DaemonSet pods tolerate those).
fn tolerates_no_schedule(tolerations: &[Toleration], key: &str) -> bool {
    let taint = Taint {
        key: key.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    tolerations.iter().any(|t| tolerates(t, &taint))
}

/// The first `NoSchedule` or `NoExecute` taint of `node` no toleration tolerates.
pub(super) fn untolerated_taint<'a>(
    node: &'a Node,
    tolerations: &[Toleration],
) -> Option<&'a Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Whether `toleration` tolerates `taint`: the effects match (an empty effect matches all),
/// the keys match (an empty key with `Exists` matches every key), and the values match
/// (`Exists` matches any value; `Equal`, the default, the same value).
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// Whether `node` satisfies the pod's `nodeSelector` (every label equal) and its required
/// node affinity (any term).
pub(crate) fn matches_node_selection(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    selector_ok
        && required.is_none_or(|r| {
            r.node_selector_terms
                .iter()
                .any(|term| term_matches(term, labels, node))
        })
}

/// Whether `node` matches one node selector term (of a PersistentVolume's node affinity).
pub(super) fn term_matches_node(term: &NodeSelectorTerm, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    term_matches(term, labels, node)
}

/// A term matches if all its expressions and fields match; a term with neither matches no
/// node (Kubernetes' rule).
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(name)))
}

/// Whether a value (absent if `None`) satisfies a requirement.
fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// What the node lacks to take the pod: `Too many pods`, then each resource whose requested
/// total would exceed allocatable (cpu, memory, ephemeral-storage, then extended resources by
/// name). Resources the pod does not request are not checked.
fn insufficient(node: &NodeInfo, facts: &NodeFacts, pod: &PodInfo) -> Vec<Reason> {
    let mut reasons = Vec::new();
    if node.pod_count + 1 > facts.pod_capacity {
        reasons.push(Reason::TooManyPods);
    }
    let want = &pod.request.resources;
    if want.is_zero() {
        return reasons;
    }
    let have = &facts.allocatable;
    let used = &node.requested;
    let short = |want: i64, have: i64, used: i64| want > 0 && want > have - used;
    if short(want.cpu_milli, have.cpu_milli, used.cpu_milli) {
        reasons.push(Reason::Insufficient(CPU.into()));
    }
    if short(want.memory, have.memory, used.memory) {
        reasons.push(Reason::Insufficient(MEMORY.into()));
    }
    if short(
        want.ephemeral_storage,
        have.ephemeral_storage,
        used.ephemeral_storage,
    ) {
        reasons.push(Reason::Insufficient(EPHEMERAL_STORAGE.into()));
    }
    for (name, amount) in &want.scalar {
        let have = have.scalar.get(name).copied().unwrap_or(0);
        let used = used.scalar.get(name).copied().unwrap_or(0);
        if short(*amount, have, used) {
            reasons.push(Reason::Insufficient(name.clone()));
        }
    }
    reasons
}

/// kube-scheduler's message for a pod no node can take: how many nodes failed for each reason,
/// sorted by reason, e.g. "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match
/// Pod's node affinity/selector.". `nodes` is how many nodes were considered.
pub(super) fn diagnosis(nodes: usize, reasons: &BTreeMap<String, usize>) -> String {
    if nodes == 0 {
        return "no nodes available to schedule pods".to_owned();
    }
    let parts: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    format!("0/{nodes} nodes are available: {}.", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };

    use super::*;
    use crate::scheduler::node_info::testing::{info, node};
    use crate::scheduler::resources::testing::pod;
    use crate::scheduler::resources::Resources;

    fn check(n: &NodeInfo, p: &Pod) -> Vec<Reason> {
        let facts = n.node.as_ref().expect("facts");
        filter(n, facts, &PodInfo::of(Arc::new(p.clone())))
    }

    fn labelled(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut n = node(name);
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        n
    }

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: opt(key),
            operator: opt(operator),
            value: opt(value),
            effect: opt(effect),
            ..Default::default()
        }
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.to_owned()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn with_affinity(terms: Vec<NodeSelectorTerm>) -> Pod {
        let mut p = pod("p", &[]);
        p.spec.as_mut().expect("spec").affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    }

    fn expr(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn term(expressions: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(expressions),
            match_fields: None,
        }
    }

    #[test]
    fn filter_should_accept_a_ready_node_with_room() {
        assert!(check(&info(node("n")), &pod("p", &[("cpu", "1")])).is_empty());
    }

    #[test]
    fn filter_should_reject_a_node_that_is_not_ready_unless_tolerated() {
        let mut unknown = node("n");
        unknown.status.as_mut().expect("status").conditions = None;
        let unknown = info(unknown);
        assert_eq!(check(&unknown, &pod("p", &[])), [Reason::NotReady]);
        let mut not_ready = node("n");
        not_ready
            .status
            .as_mut()
            .expect("status")
            .conditions
            .as_mut()
            .expect("c")[0]
            .status = "False".into();
        let not_ready = info(not_ready);
        assert_eq!(check(&not_ready, &pod("p", &[])), [Reason::NotReady]);
        let mut p = pod("p", &[]);
        p.spec.as_mut().expect("spec").tolerations = Some(vec![toleration(
            NOT_READY_TAINT,
            "Exists",
            "",
            "NoSchedule",
        )]);
        assert!(check(&not_ready, &p).is_empty());
        assert_eq!(
            check(&unknown, &p),
            [Reason::NotReady],
            "unreachable is another taint"
        );
    }

    #[test]
    fn filter_should_reject_a_cordoned_node_unless_tolerated() {
        let mut n = node("n");
        n.spec.as_mut().expect("spec").unschedulable = Some(true);
        let n = info(n);
        assert_eq!(check(&n, &pod("p", &[])), [Reason::Cordoned]);
        let mut p = pod("p", &[]);
        p.spec.as_mut().expect("spec").tolerations =
            Some(vec![toleration(UNSCHEDULABLE_TAINT, "Exists", "", "")]);
        assert!(check(&n, &p).is_empty());
    }

    #[test]
    fn tolerates_should_follow_operators_keys_and_effects() {
        let t = taint("dedicated", "gpu", "NoSchedule");
        assert!(tolerates(
            &toleration("dedicated", "Equal", "gpu", "NoSchedule"),
            &t
        ));
        assert!(
            tolerates(&toleration("dedicated", "", "gpu", ""), &t),
            "Equal by default"
        );
        assert!(!tolerates(
            &toleration("dedicated", "Equal", "cpu", "NoSchedule"),
            &t
        ));
        assert!(tolerates(&toleration("dedicated", "Exists", "", ""), &t));
        assert!(!tolerates(
            &toleration("dedicated", "Exists", "", "NoExecute"),
            &t
        ));
        assert!(
            tolerates(&toleration("", "Exists", "", ""), &t),
            "empty key + Exists"
        );
        assert!(!tolerates(&toleration("", "Equal", "", ""), &t));
        assert!(!tolerates(&toleration("other", "Exists", "", ""), &t));
    }

    #[test]
    fn filter_should_reject_untolerated_no_schedule_and_no_execute_taints_only() {
        let mut n = node("n");
        n.spec.as_mut().expect("spec").taints = Some(vec![
            taint("soft", "", "PreferNoSchedule"),
            taint("dedicated", "gpu", "NoExecute"),
        ]);
        let n = info(n);
        assert_eq!(
            check(&n, &pod("p", &[])),
            [Reason::UntoleratedTaint {
                key: "dedicated".into(),
                value: "gpu".into()
            }]
        );
        assert_eq!(
            check(&n, &pod("p", &[]))[0].to_string(),
            "node(s) had untolerated taint {dedicated: gpu}"
        );
        let mut p = pod("p", &[]);
        p.spec.as_mut().expect("spec").tolerations =
            Some(vec![toleration("dedicated", "Equal", "gpu", "NoExecute")]);
        assert!(check(&n, &p).is_empty(), "PreferNoSchedule never filters");
    }

    #[test]
    fn filter_should_apply_the_node_selector() {
        let mut p = pod("p", &[]);
        p.spec.as_mut().expect("spec").node_selector = Some([("disk".into(), "ssd".into())].into());
        assert!(check(&info(labelled("a", &[("disk", "ssd")])), &p).is_empty());
        assert_eq!(
            check(&info(labelled("b", &[("disk", "hdd")])), &p),
            [Reason::NodeAffinity]
        );
        assert_eq!(check(&info(node("c")), &p), [Reason::NodeAffinity]);
    }

    #[test]
    fn affinity_should_or_terms_and_and_expressions() {
        let p = with_affinity(vec![
            term(vec![
                expr("zone", "In", &["a", "b"]),
                expr("gpu", "DoesNotExist", &[]),
            ]),
            term(vec![expr("tier", "Exists", &[])]),
        ]);
        let fits = |labels: &[(&str, &str)]| matches_node_selection(&p, &labelled("n", labels));
        assert!(fits(&[("zone", "a")]));
        assert!(
            !fits(&[("zone", "a"), ("gpu", "1")]),
            "expressions are ANDed"
        );
        assert!(fits(&[("zone", "c"), ("tier", "x")]), "terms are ORed");
        assert!(!fits(&[("zone", "c")]));
    }

    #[test]
    fn affinity_should_support_not_in_gt_lt_and_match_fields() {
        let p = with_affinity(vec![term(vec![
            expr("zone", "NotIn", &["a"]),
            expr("cores", "Gt", &["4"]),
            expr("cores", "Lt", &["64"]),
        ])]);
        let fits = |labels: &[(&str, &str)]| matches_node_selection(&p, &labelled("n", labels));
        assert!(fits(&[("cores", "8")]), "NotIn holds for an absent label");
        assert!(!fits(&[("cores", "8"), ("zone", "a")]));
        assert!(!fits(&[("cores", "4")]));
        assert!(!fits(&[("cores", "64")]));
        assert!(!fits(&[("cores", "many")]));
        let by_name = with_affinity(vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![expr("metadata.name", "In", &["n1"])]),
        }]);
        assert!(matches_node_selection(&by_name, &node("n1")));
        assert!(!matches_node_selection(&by_name, &node("n2")));
        let empty = with_affinity(vec![NodeSelectorTerm::default()]);
        assert!(
            !matches_node_selection(&empty, &node("n1")),
            "an empty term matches nothing"
        );
    }

    #[test]
    fn filter_should_count_what_is_placed_on_the_node() {
        let mut n = info(node("n"));
        n.requested = Resources {
            cpu_milli: 3_500,
            ..Default::default()
        };
        n.pod_count = 109;
        assert!(
            check(&n, &pod("p", &[("cpu", "500m")])).is_empty(),
            "exactly full fits"
        );
        assert_eq!(
            check(&n, &pod("p", &[("cpu", "501m"), ("memory", "9Gi")])),
            [
                Reason::Insufficient("cpu".into()),
                Reason::Insufficient("memory".into())
            ]
        );
        n.pod_count = 110;
        assert_eq!(check(&n, &pod("p", &[])), [Reason::TooManyPods]);
    }

    #[test]
    fn filter_should_reject_extended_resources_the_node_lacks() {
        let p = pod("p", &[("example.com/gpu", "1")]);
        assert_eq!(
            check(&info(node("n")), &p),
            [Reason::Insufficient("example.com/gpu".into())]
        );
    }

    #[test]
    fn diagnosis_should_read_like_kube_schedulers() {
        let reasons: BTreeMap<String, usize> = [
            (
                "node(s) didn't match Pod's node affinity/selector".to_owned(),
                2,
            ),
            ("Insufficient cpu".to_owned(), 1),
        ]
        .into();
        assert_eq!(
            diagnosis(3, &reasons),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."
        );
        assert_eq!(
            diagnosis(0, &BTreeMap::new()),
            "no nodes available to schedule pods"
        );
    }
}
