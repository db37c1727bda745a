//! A DaemonSet's status, computed as kube-controller-manager does: over the nodes that should
//! run its pod, how many have one (`currentNumberScheduled`), whose oldest is ready
//! (`numberReady`) and available (`numberAvailable`), made from the update revision
//! (`updatedNumberScheduled`); pods on nodes that should not run one (`numberMisscheduled`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use super::placement::placement;
use super::plan::{by_age, is_updated};
use crate::pod_state::{is_available, is_running_and_ready, is_terminating, min_ready};

/// The status of `ds` (pod template `template`, update revision `hash`) over `nodes` with
/// its pods by node.
pub(super) fn compute(
    ds: &DaemonSet,
    template: &Pod,
    nodes: &[Arc<Node>],
    pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    collision_count: Option<i32>,
    now: Timestamp,
) -> DaemonSetStatus {
    let min_ready = min_ready(ds.spec.as_ref().and_then(|s| s.min_ready_seconds));
    let mut status = DaemonSetStatus {
        observed_generation: ds.metadata.generation,
        collision_count,
        conditions: ds.status.as_ref().and_then(|s| s.conditions.clone()),
        ..Default::default()
    };
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut on_node: Vec<Arc<Pod>> = pods
            .get(name)
            .map(|p| p.iter().filter(|p| !is_terminating(p)).cloned().collect())
            .unwrap_or_default();
        on_node.sort_by(by_age);
        if placement(template, node).should_run {
            status.desired_number_scheduled += 1;
            let Some(oldest) = on_node.first() else {
                continue;
            };
            status.current_number_scheduled += 1;
            if is_running_and_ready(oldest) {
                ready += 1;
            }
            if is_available(oldest, min_ready, now) {
                available += 1;
            }
            if is_updated(oldest, hash) {
                updated += 1;
            }
        } else if !on_node.is_empty() {
            status.number_misscheduled += 1;
        }
    }
    status.number_ready = ready;
    status.number_available = Some(available);
    status.updated_number_scheduled = Some(updated);
    status.number_unavailable = Some(status.desired_number_scheduled - available);
    status
}
