//! What the loop reads off a Deployment and its ReplicaSets: counts (spec, status, available),
//! the controlling Deployment, the orders kube-controller-manager sorts ReplicaSets in, and the
//! Deployment's selector.

use std::cmp::Ordering;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use setpoint_core::LabelSelector;
use setpoint_runtime::owner;

use super::annotations::revision_of;

/// `spec.replicas` of a Deployment (1 when unset, as the server defaults it).
pub(super) fn desired(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.replicas` of a ReplicaSet (1 when unset, as the server defaults it).
pub(super) fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `status.replicas` of a ReplicaSet: the active pods it has.
pub(super) fn status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

/// `status.readyReplicas` of a ReplicaSet.
pub(super) fn ready_replicas(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

/// The available pods a ReplicaSet may be counted on for: its `status.availableReplicas`, but
/// never more than `spec.replicas` — a ReplicaSet just scaled down is about to lose the
/// surplus, whichever pods its status still counts, so a stale status never lets the loop
/// believe in more available pods than will remain.
pub(super) fn available_replicas(rs: &ReplicaSet) -> i32 {
    let available = rs
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    available.min(spec_replicas(rs).max(0))
}

/// The pods a ReplicaSet may have at most right now: the larger of what it is asked for and
/// what it last reported (a ReplicaSet scaled down still has its surplus until its loop
/// deletes it; one scaled up may not have reported its new pods yet).
pub(super) fn pods_at_most(rs: &ReplicaSet) -> i32 {
    spec_replicas(rs).max(status_replicas(rs))
}

/// Whether the ReplicaSet is asked for any pods.
pub(super) fn is_active(rs: &ReplicaSet) -> bool {
    spec_replicas(rs) > 0
}

/// Σ `spec.replicas`.
pub(super) fn sum_spec(rses: &[&ReplicaSet]) -> i32 {
    rses.iter().map(|rs| spec_replicas(rs)).sum()
}

/// Σ `status.replicas`.
pub(super) fn sum_status(rses: &[&ReplicaSet]) -> i32 {
    rses.iter().map(|rs| status_replicas(rs)).sum()
}

/// Σ [`available_replicas`].
pub(super) fn sum_available(rses: &[&ReplicaSet]) -> i32 {
    rses.iter().map(|rs| available_replicas(rs)).sum()
}

/// The name of the Deployment (any version of `apps`) controlling an object, if one does.
pub(super) fn deployment_of(meta: &ObjectMeta) -> Option<&str> {
    owner::controller_ref_of_kind::<Deployment>(meta).map(|r| r.name.as_str())
}

/// The Deployment's selector; `None` if it is empty or invalid (the server rejects both, and
/// Kubernetes refuses to act on a Deployment selecting every pod).
pub(super) fn selector_of(d: &Deployment) -> Option<LabelSelector> {
    let selector = serde_json::to_value(&d.spec.as_ref()?.selector).ok()?;
    let selector = LabelSelector::from_structured(&selector).ok()?;
    (!selector.is_everything() && !selector.is_nothing()).then_some(selector)
}

/// Oldest first by creation time, then by name (Kubernetes' `ReplicaSetsByCreationTimestamp`).
pub(super) fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Lowest revision first, then oldest (`ReplicaSetsByRevision`): the order old ReplicaSets are
/// cleaned up in.
pub(super) fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    revision_of(&a.metadata)
        .cmp(&revision_of(&b.metadata))
        .then_with(|| by_creation(a, b))
}

/// Largest first; among equals, newest first (`ReplicaSetsBySizeNewer`): who gets extra
/// replicas first when a Deployment scales up mid-rollout.
pub(super) fn by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    spec_replicas(b)
        .cmp(&spec_replicas(a))
        .then_with(|| by_creation(b, a))
}

/// Largest first; among equals, oldest first (`ReplicaSetsBySizeOlder`): who loses replicas
/// first when a Deployment scales down mid-rollout.
pub(super) fn by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    spec_replicas(b)
        .cmp(&spec_replicas(a))
        .then_with(|| by_creation(a, b))
}

#[cfg(test)]
pub(super) mod testing {
    //! ReplicaSets in given states, for this module's siblings' tests.

    use super::*;
    use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    /// A ReplicaSet `name` created `created_s` seconds after a fixed instant, asking for
    /// `spec` pods, with `status` of them existing and `available` available.
    pub(crate) fn rs(
        name: &str,
        created_s: i64,
        spec: i32,
        status: i32,
        available: i32,
    ) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time(
                    Timestamp::from_second(1_700_000_000 + created_s).expect("valid"),
                )),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(spec),
                ..Default::default()
            }),
            status: Some(ReplicaSetStatus {
                replicas: status,
                available_replicas: Some(available),
                ..Default::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::rs;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn available_should_never_exceed_the_replicas_asked_for() {
        assert_eq!(available_replicas(&rs("a", 0, 3, 3, 3)), 3);
        assert_eq!(
            available_replicas(&rs("a", 0, 1, 3, 3)),
            1,
            "scaled down, status not yet caught up"
        );
        assert_eq!(pods_at_most(&rs("a", 0, 1, 3, 3)), 3);
        assert_eq!(pods_at_most(&rs("a", 0, 4, 3, 3)), 4);
    }

    #[test]
    fn size_orders_should_break_ties_by_age() {
        let old = rs("old", 0, 2, 0, 0);
        let new = rs("new", 10, 2, 0, 0);
        let big = rs("big", 5, 5, 0, 0);
        let mut v = vec![&old, &new, &big];
        v.sort_by(|a, b| by_size_newer(a, b));
        assert_eq!(names(&v), ["big", "new", "old"]);
        v.sort_by(|a, b| by_size_older(a, b));
        assert_eq!(names(&v), ["big", "old", "new"]);
        v.sort_by(|a, b| by_creation(a, b));
        assert_eq!(names(&v), ["old", "big", "new"]);
    }

    fn names<'a>(v: &'a [&ReplicaSet]) -> Vec<&'a str> {
        v.iter()
            .map(|rs| rs.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn deployment_of_should_name_only_deployment_controllers() {
        let mut meta = ObjectMeta::default();
        assert_eq!(deployment_of(&meta), None);
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "web".into(),
            uid: "u".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        assert_eq!(deployment_of(&meta), Some("web"));
        if let Some(r) = meta.owner_references.as_mut().and_then(|r| r.first_mut()) {
            r.controller = None;
        }
        assert_eq!(deployment_of(&meta), None);
    }
}
