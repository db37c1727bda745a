//! A StatefulSet's status, computed from its pods (kube-controller-manager's): `replicas`
//! counts every member pod, `readyReplicas` the running and ready ones, `availableReplicas`
//! those ready for `minReadySeconds`, `currentReplicas`/`updatedReplicas` the live pods of the
//! current and update revisions. Once a rolling update has every pod updated and ready, the
//! update revision becomes the current one.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::identity::revision_of;
use crate::pod_state::{
    availability, is_running_and_ready, is_terminating, min_ready, Availability,
};

/// The status `set` has with `pods` (its members), revisions `current`/`update` and
/// `collision_count`; and when a ready pod becomes available, if one will.
pub(super) fn compute(
    set: &StatefulSet,
    pods: &[Arc<Pod>],
    current: &str,
    update: &str,
    collision_count: Option<i32>,
    now: Timestamp,
) -> (StatefulSetStatus, Option<Duration>) {
    let min_ready = min_ready(set.spec.as_ref().and_then(|s| s.min_ready_seconds));
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        collision_count,
        current_revision: Some(current.to_owned()),
        update_revision: Some(update.to_owned()),
        conditions: set.status.as_ref().and_then(|s| s.conditions.clone()),
        ..Default::default()
    };
    let (mut ready, mut available, mut current_count, mut updated) = (0, 0, 0, 0);
    let mut next = None;
    for pod in pods {
        status.replicas += 1;
        if is_running_and_ready(pod) {
            ready += 1;
        }
        match availability(pod, min_ready, now) {
            Availability::Available => available += 1,
            Availability::ReadyFor(wait) => next = crate::pod_state::sooner(next, Some(wait)),
            Availability::NotReady => {}
        }
        if !is_terminating(pod) {
            let revision = revision_of(pod);
            if revision == Some(current) {
                current_count += 1;
            }
            if revision == Some(update) {
                updated += 1;
            }
        }
    }
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.current_replicas = Some(current_count);
    status.updated_replicas = Some(updated);
    let rolling = set
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        != Some("OnDelete");
    if rolling && updated == status.replicas && ready == status.replicas {
        status.current_revision = Some(update.to_owned());
        status.current_replicas = Some(updated);
    }
    (status, next)
}
