//! The scheduler's cache: every node with the running totals of the pods placed on it, every
//! placed pod (bound, as the informer shows it, or *assumed*: chosen by this scheduler, its
//! binding not yet seen), and the pods waiting as unschedulable. One decision
//! ([`Cache::schedule`]) filters and scores every node against these totals and, if a node
//! fits, assumes the pod on it at once, so the next decision — before any informer event —
//! already counts it: a burst of pods neither piles onto one node nor overcommits one.
//!
//! An assumption ends when the informer shows the pod assigned ([`Cache::observe_assigned`]:
//! it becomes bound, moved if it went elsewhere), when the binding fails ([`Cache::forget`]) or
//! when the pod is deleted ([`Cache::remove_pod`]). Totals change by the pod's request on each
//! add and removal, never by rescanning pods.
//!
//! Pods found unschedulable are remembered in the same cache, under the same lock as node
//! changes, so a node that appears just after a decision always moves the pod back to the
//! queue ([`Cache::take_unschedulable`]): no change is missed between the decision and the
//! recording.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use setpoint_runtime::ObjectKey;

use super::filter::{diagnosis, filter};
use super::node_info::{NodeFacts, NodeInfo, PodInfo};
use super::resources::PodRequest;
use super::score::{least_allocated, pick};
use super::volumes::VolumeNeeds;

/// Whether a placed pod's binding has been seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placement {
    /// This scheduler chose the node; the informer has not shown the binding yet.
    Assumed,
    /// The informer shows the pod assigned to the node.
    Bound,
}

/// A pod counted on a node.
#[derive(Debug, Clone)]
struct Placed {
    node: String,
    request: PodRequest,
    placement: Placement,
}

/// The outcome of one scheduling decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// The pod is assumed on this node; bind it there.
    Bind(String),
    /// No node fits; the pod is recorded as unschedulable. kube-scheduler's message.
    Unschedulable(String),
    /// The pod is already placed (assumed or bound): nothing to do.
    AlreadyPlaced,
}

/// Nodes, placed pods and unschedulable pods.
///
/// Invariants: each node's `requested`, `non_zero` and `pod_count` are the sums over the
/// entries of `pods` placed on it; a node entry without a Node object (`node: None`) exists only
/// while pods are placed on it.
#[derive(Debug, Default)]
pub(super) struct Cache {
    /// By node name (ordered, so decisions are reproducible).
    nodes: BTreeMap<String, NodeInfo>,
    /// Placed pods, by UID.
    pods: HashMap<String, Placed>,
    /// Pods no node could take, waiting for a change that may make room.
    unschedulable: HashSet<ObjectKey>,
    /// Where the next decision starts looking among equally scored nodes.
    rotation: usize,
}

impl Cache {
    /// Adds or updates a node.
    pub(super) fn set_node(&mut self, node: Arc<Node>) {
        let facts = NodeFacts::of(node);
        let name = facts.name().to_owned();
        self.nodes.entry(name).or_default().node = Some(facts);
    }

    /// Removes a node. Pods still placed on it stay counted there until they go.
    pub(super) fn remove_node(&mut self, name: &str) {
        if let Some(info) = self.nodes.get_mut(name) {
            info.node = None;
            if info.pod_count == 0 {
                self.nodes.remove(name);
            }
        }
    }

    /// The informer shows pod `uid` assigned to `node` and not finished: counts it there as
    /// bound (confirming an assumption, or moving it if it went elsewhere).
    pub(super) fn observe_assigned(&mut self, uid: &str, node: &str, request: PodRequest) {
        if let Some(placed) = self.pods.get_mut(uid) {
            if placed.node == node && placed.request == request {
                placed.placement = Placement::Bound;
                return;
            }
        }
        self.remove_pod(uid);
        self.place(uid, node, request, Placement::Bound);
    }

    /// Pod `uid` is gone (deleted or finished): its request no longer counts. Returns whether
    /// it was placed.
    pub(super) fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(placed) = self.pods.remove(uid) else {
            return false;
        };
        if let Some(info) = self.nodes.get_mut(&placed.node) {
            info.requested.subtract(&placed.request.resources);
            info.non_zero.subtract(placed.request.non_zero);
            info.pod_count -= 1;
            if info.pod_count == 0 && info.node.is_none() {
                self.nodes.remove(&placed.node);
            }
        }
        true
    }

    /// The binding of pod `uid` failed: drops its assumption (a bound pod stays).
    pub(super) fn forget(&mut self, uid: &str) {
        if self
            .pods
            .get(uid)
            .is_some_and(|p| p.placement == Placement::Assumed)
        {
            self.remove_pod(uid);
        }
    }

    /// How pod `uid` is placed, if it is (for tests).
    #[cfg(test)]
    pub(super) fn placement(&self, uid: &str) -> Option<(&str, Placement)> {
        self.pods.get(uid).map(|p| (p.node.as_str(), p.placement))
    }

    /// Decides where `pod` goes: filters every node, scores those that fit and assumes the
    /// pod on the best (ties rotate). If none fits, records the pod as unschedulable.
    #[cfg(test)]
    pub(super) fn schedule(&mut self, pod: &PodInfo) -> Decision {
        self.schedule_with(pod, &VolumeNeeds::default())
    }

    /// As [`schedule`](Self::schedule), also honouring what the pod's claims need.
    pub(super) fn schedule_with(&mut self, pod: &PodInfo, volumes: &VolumeNeeds) -> Decision {
        if self.pods.contains_key(&pod.uid) {
            return Decision::AlreadyPlaced;
        }
        if let Some(message) = &volumes.blocked {
            self.unschedulable.insert(pod.key.clone());
            return Decision::Unschedulable(format!(
                "0/{} nodes are available: {message}.",
                self.nodes.len()
            ));
        }
        let mut feasible: Vec<&str> = Vec::new();
        let mut scores: Vec<i64> = Vec::new();
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let mut considered = 0;
        for (name, info) in &self.nodes {
            let Some(facts) = &info.node else { continue };
            considered += 1;
            let mut why = filter(info, facts, pod);
            if why.is_empty() && !volumes.allows(&facts.object) {
                why.push(super::filter::Reason::VolumeNodeAffinity);
            }
            if why.is_empty() {
                feasible.push(name);
                scores.push(least_allocated(info, facts, pod));
            } else {
                for reason in why {
                    *reasons.entry(reason.to_string()).or_insert(0) += 1;
                }
            }
        }
        self.rotation = self.rotation.wrapping_add(1);
        match pick(&scores, self.rotation) {
            Some(i) => {
                let node = feasible[i].to_owned();
                self.place(&pod.uid, &node, pod.request.clone(), Placement::Assumed);
                self.unschedulable.remove(&pod.key);
                Decision::Bind(node)
            }
            None => {
                self.unschedulable.insert(pod.key.clone());
                Decision::Unschedulable(diagnosis(considered, &reasons))
            }
        }
    }

    /// Every pod recorded as unschedulable, which no longer is: for a change that may have
    /// made room (a node added or changed, a placed pod gone).
    pub(super) fn take_unschedulable(&mut self) -> Vec<ObjectKey> {
        self.unschedulable.drain().collect()
    }

    /// Forgets that the pod was unschedulable (it was deleted, or scheduled elsewhere).
    pub(super) fn drop_unschedulable(&mut self, key: &ObjectKey) {
        self.unschedulable.remove(key);
    }

    /// How many pods are placed on `node` and what they request (for tests and logs).
    #[cfg(test)]
    pub(super) fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name)
    }

    fn place(&mut self, uid: &str, node: &str, request: PodRequest, placement: Placement) {
        let info = self.nodes.entry(node.to_owned()).or_default();
        info.requested.add(&request.resources);
        info.non_zero.add(request.non_zero);
        info.pod_count += 1;
        self.pods.insert(
            uid.to_owned(),
            Placed {
                node: node.to_owned(),
                request,
                placement,
            },
        );
    }

    /// Checks the invariants by recomputing every node's totals.
    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        let mut expected: BTreeMap<&str, NodeInfo> = BTreeMap::new();
        for p in self.pods.values() {
            let info = expected.entry(&p.node).or_default();
            info.requested.add(&p.request.resources);
            info.non_zero.add(p.request.non_zero);
            info.pod_count += 1;
        }
        for (name, info) in &self.nodes {
            let want = expected.remove(name.as_str()).unwrap_or_default();
            assert_eq!(info.requested, want.requested, "requested on {name}");
            assert_eq!(info.non_zero, want.non_zero, "non-zero on {name}");
            assert_eq!(info.pod_count, want.pod_count, "pod count on {name}");
            assert!(
                info.node.is_some() || info.pod_count > 0,
                "{name} has neither object nor pods"
            );
        }
        assert!(expected.is_empty(), "pods on unknown nodes: {expected:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::node_info::testing::node;
    use crate::scheduler::resources::testing::pod;

    fn cache(nodes: &[&str]) -> Cache {
        let mut c = Cache::default();
        for n in nodes {
            c.set_node(Arc::new(node(n)));
        }
        c
    }

    fn info(name: &str, requests: &[(&str, &str)]) -> PodInfo {
        PodInfo::of(Arc::new(pod(name, requests)))
    }

    #[test]
    fn schedule_should_assume_so_a_burst_spreads_and_never_overcommits() {
        let mut c = cache(&["a", "b"]);
        let mut placed: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..8 {
            match c.schedule(&info(&format!("p{i}"), &[("cpu", "1")])) {
                Decision::Bind(n) => *placed.entry(n).or_default() += 1,
                other => panic!("p{i}: {other:?}"),
            }
            c.check_invariants();
        }
        assert_eq!(placed, [("a".to_owned(), 4), ("b".to_owned(), 4)].into());
        assert_eq!(
            c.schedule(&info("p8", &[("cpu", "1")])),
            Decision::Unschedulable("0/2 nodes are available: 2 Insufficient cpu.".into())
        );
    }

    #[test]
    fn schedule_should_not_place_a_pod_twice() {
        let mut c = cache(&["a"]);
        let p = info("p", &[]);
        assert!(matches!(c.schedule(&p), Decision::Bind(_)));
        assert_eq!(c.schedule(&p), Decision::AlreadyPlaced);
        c.check_invariants();
    }

    #[test]
    fn forget_should_free_an_assumed_pod_but_keep_a_bound_one() {
        let mut c = cache(&["a"]);
        let p = info("p", &[("cpu", "4")]);
        assert_eq!(c.schedule(&p), Decision::Bind("a".into()));
        c.forget(&p.uid);
        assert_eq!(c.node("a").expect("a").pod_count, 0);
        assert_eq!(c.schedule(&p), Decision::Bind("a".into()));
        c.observe_assigned(&p.uid, "a", p.request.clone());
        assert_eq!(c.placement(&p.uid), Some(("a", Placement::Bound)));
        c.forget(&p.uid);
        assert_eq!(c.node("a").expect("a").requested.cpu_milli, 4_000);
        c.check_invariants();
    }

    #[test]
    fn observe_assigned_should_move_a_pod_bound_elsewhere() {
        let mut c = cache(&["a", "b"]);
        let p = info("p", &[("cpu", "1")]);
        let Decision::Bind(chosen) = c.schedule(&p) else {
            panic!("fits")
        };
        let other = if chosen == "a" { "b" } else { "a" };
        c.observe_assigned(&p.uid, other, p.request.clone());
        assert_eq!(c.node(&chosen).expect("node").pod_count, 0);
        assert_eq!(c.node(other).expect("node").pod_count, 1);
        assert!(c.remove_pod(&p.uid));
        assert!(!c.remove_pod(&p.uid));
        c.check_invariants();
    }

    #[test]
    fn remove_node_should_keep_counting_its_pods_until_they_go() {
        let mut c = cache(&["a"]);
        let p = info("p", &[("cpu", "1")]);
        c.observe_assigned(&p.uid, "a", p.request.clone());
        c.remove_node("a");
        assert_eq!(
            c.schedule(&info("q", &[])),
            Decision::Unschedulable("no nodes available to schedule pods".into())
        );
        c.check_invariants();
        c.set_node(Arc::new(node("a")));
        assert_eq!(c.node("a").expect("a").requested.cpu_milli, 1_000);
        c.remove_node("a");
        c.remove_pod(&p.uid);
        assert!(c.node("a").is_none());
        c.check_invariants();
    }

    #[test]
    fn unschedulable_pods_should_be_taken_once_and_dropped_when_scheduled() {
        let mut c = cache(&[]);
        let p = info("p", &[]);
        assert!(matches!(c.schedule(&p), Decision::Unschedulable(_)));
        assert_eq!(c.take_unschedulable(), std::slice::from_ref(&p.key));
        assert!(c.take_unschedulable().is_empty());
        assert!(matches!(c.schedule(&p), Decision::Unschedulable(_)));
        c.set_node(Arc::new(node("a")));
        assert_eq!(c.schedule(&p), Decision::Bind("a".into()));
        assert!(
            c.take_unschedulable().is_empty(),
            "scheduled pods are not unschedulable"
        );
        let q = info("q", &[]);
        c.unschedulable.insert(q.key.clone());
        c.drop_unschedulable(&q.key);
        assert!(c.take_unschedulable().is_empty());
    }
}
