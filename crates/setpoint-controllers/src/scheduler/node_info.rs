//! What one scheduling decision looks at: [`NodeInfo`] (a node's schedulable facts, parsed once
//! per node update, and the running totals of what the pods placed on it request) and
//! [`PodInfo`] (the pod being scheduled, its request parsed once per attempt).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use setpoint_runtime::ObjectKey;

use super::resources::{pod_capacity, NonZero, PodRequest, Resources};

/// A node's `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readiness {
    /// `Ready=True`.
    Ready,
    /// `Ready=False`: the node says it cannot run pods (kube taints it `not-ready`).
    NotReady,
    /// `Ready=Unknown` or no `Ready` condition: the node is not heard from (kube taints it
    /// `unreachable`).
    Unknown,
}

/// A node as the scheduler sees it: the last cached Node object (if any) and the totals of the
/// pods placed on it.
///
/// Invariant (kept by the cache): `requested`, `non_zero` and `pod_count` are the sums over
/// exactly the pods the cache places on this node, assumed or bound.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeInfo {
    /// The node's facts; `None` while pods are known on a node the cache has no object for
    /// (deleted, or not yet seen): such a node is never a candidate.
    pub(super) node: Option<NodeFacts>,
    /// Sum of the requests of the pods placed here.
    pub(super) requested: Resources,
    /// Sum of their scoring requests.
    pub(super) non_zero: NonZero,
    /// How many pods are placed here.
    pub(super) pod_count: i64,
}

/// A Node object's facts that filters and scores use, parsed once per update.
#[derive(Debug, Clone)]
pub(super) struct NodeFacts {
    /// The object (labels, taints, name).
    pub(super) object: Arc<Node>,
    /// `status.allocatable` without `pods`.
    pub(super) allocatable: Resources,
    /// `status.allocatable.pods`.
    pub(super) pod_capacity: i64,
    /// The `Ready` condition.
    pub(super) readiness: Readiness,
    /// `spec.unschedulable` (cordoned).
    pub(super) cordoned: bool,
}

impl NodeFacts {
    /// Parses `node`.
    pub(super) fn of(node: Arc<Node>) -> NodeFacts {
        let status = node.status.as_ref();
        let allocatable = status.and_then(|s| s.allocatable.as_ref());
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.as_str());
        NodeFacts {
            allocatable: Resources::from_list(allocatable),
            pod_capacity: pod_capacity(allocatable),
            readiness: match ready {
                Some("True") => Readiness::Ready,
                Some("False") => Readiness::NotReady,
                _ => Readiness::Unknown,
            },
            cordoned: node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
            object: node,
        }
    }

    /// The node's name.
    pub(super) fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or_default()
    }
}

/// The pod being scheduled.
#[derive(Debug, Clone)]
pub(super) struct PodInfo {
    /// The cached object.
    pub(super) pod: Arc<Pod>,
    /// Its key in the queue.
    pub(super) key: ObjectKey,
    /// `metadata.uid`, which the cache files placed pods under.
    pub(super) uid: String,
    /// What it requests.
    pub(super) request: PodRequest,
}

impl PodInfo {
    /// Parses `pod`.
    pub(super) fn of(pod: Arc<Pod>) -> PodInfo {
        PodInfo {
            key: ObjectKey::of(pod.as_ref()),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            request: PodRequest::of(&pod),
            pod,
        }
    }
}

/// Whether the phase is `Succeeded` or `Failed`: the pod's containers are done and it holds
/// no resources.
pub(super) fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The node the pod is assigned to, if any.
pub(super) fn assigned_node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// This scheduler's name: pods naming no scheduler, or this one, are its to schedule.
pub(super) const SCHEDULER_NAME: &str = "default-scheduler";

/// Whether this scheduler must place `pod`: unassigned, for this scheduler, not held back by
/// `schedulingGates`, not terminating, not finished.
pub(super) fn needs_scheduling(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let ours = spec
        .and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|n| n.is_empty() || n == SCHEDULER_NAME);
    let gated = spec
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty());
    ours && !gated
        && assigned_node(pod).is_none()
        && pod.metadata.deletion_timestamp.is_none()
        && !is_finished(pod)
}

#[cfg(test)]
pub(super) mod testing {
    //! Building nodes, for tests of this module and its siblings.

    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::scheduler::resources::testing::list;

    /// A Ready node `name` with 4 cpus, 8Gi of memory and room for 110 pods.
    pub(in crate::scheduler) fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(list(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// A [`NodeInfo`] for `node` with nothing placed on it.
    pub(in crate::scheduler) fn info(node: Node) -> NodeInfo {
        NodeInfo {
            node: Some(NodeFacts::of(Arc::new(node))),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::node;
    use super::*;
    use crate::scheduler::resources::testing::pod;

    #[test]
    fn needs_scheduling_should_skip_assigned_foreign_gated_terminating_and_finished_pods() {
        let p = pod("p", &[]);
        assert!(needs_scheduling(&p));
        let mut assigned = p.clone();
        assigned.spec.as_mut().expect("spec").node_name = Some("n".into());
        assert!(!needs_scheduling(&assigned));
        let mut foreign = p.clone();
        foreign.spec.as_mut().expect("spec").scheduler_name = Some("other".into());
        assert!(!needs_scheduling(&foreign));
        let mut named = p.clone();
        named.spec.as_mut().expect("spec").scheduler_name = Some(SCHEDULER_NAME.into());
        assert!(needs_scheduling(&named));
        let mut finished = p.clone();
        finished.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Failed".into()),
            ..Default::default()
        });
        assert!(!needs_scheduling(&finished));
        let mut gated = p.clone();
        gated.spec.as_mut().expect("spec").scheduling_gates =
            Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: "example.com/wait".into(),
            }]);
        assert!(!needs_scheduling(&gated));
        let mut terminating = p;
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!needs_scheduling(&terminating));
    }

    #[test]
    fn node_facts_should_read_readiness_cordon_and_capacity() {
        let facts = NodeFacts::of(Arc::new(node("n")));
        assert_eq!(facts.readiness, Readiness::Ready);
        assert!(!facts.cordoned);
        assert_eq!(facts.allocatable.cpu_milli, 4_000);
        assert_eq!(facts.pod_capacity, 110);
        let mut n = node("n");
        n.status
            .as_mut()
            .expect("status")
            .conditions
            .as_mut()
            .expect("c")[0]
            .status = "Unknown".into();
        n.spec.as_mut().expect("spec").unschedulable = Some(true);
        let facts = NodeFacts::of(Arc::new(n));
        assert_eq!(facts.readiness, Readiness::Unknown);
        assert!(facts.cordoned);
        let mut n = node("n");
        n.status
            .as_mut()
            .expect("status")
            .conditions
            .as_mut()
            .expect("c")[0]
            .status = "False".into();
        assert_eq!(NodeFacts::of(Arc::new(n)).readiness, Readiness::NotReady);
        let mut n = node("n");
        n.status.as_mut().expect("status").conditions = None;
        assert_eq!(NodeFacts::of(Arc::new(n)).readiness, Readiness::Unknown);
    }
}
