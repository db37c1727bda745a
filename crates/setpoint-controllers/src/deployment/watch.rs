//! How ReplicaSet, pod and Deployment events reach the loop:
//!
//! - a ReplicaSet event marks the write it shows as observed ([`Expectations`]), then enqueues
//!   its controlling Deployment (for an update, those of the old and the new state), or — for
//!   an orphan — every Deployment of its namespace selecting it, which may adopt it;
//! - a pod deletion enqueues the Recreate Deployment whose ReplicaSet controlled the pod (it
//!   may be waiting for its old pods to be gone);
//! - a deleted Deployment's expectations are forgotten.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::owner::controller_ref;
use setpoint_runtime::{Deleted, Enqueuer, EventHandler, ObjectCache, ObjectKey};

use super::expectations::Expectations;
use super::replicasets::{deployment_of, selector_of};
use super::sizing::Strategy;

/// The Deployment controlling `rs`, as a key.
fn controller_key(rs: &ReplicaSet) -> Option<ObjectKey> {
    Some(ObjectKey {
        namespace: rs.metadata.namespace.clone(),
        name: deployment_of(&rs.metadata)?.to_owned(),
    })
}

/// The Deployments to sync when `rs` changes: its controller; for an orphan not being
/// deleted, every Deployment of its namespace selecting it.
pub(super) fn deployments_for_replicaset(
    deployments: &ObjectCache<Deployment>,
    rs: &ReplicaSet,
) -> Vec<ObjectKey> {
    if controller_ref(&rs.metadata).is_some() {
        return controller_key(rs).into_iter().collect();
    }
    let (Some(namespace), None) = (&rs.metadata.namespace, &rs.metadata.deletion_timestamp) else {
        return Vec::new();
    };
    let empty = BTreeMap::new();
    let labels = rs.metadata.labels.as_ref().unwrap_or(&empty);
    deployments
        .list_namespace(namespace)
        .iter()
        .filter(|d| selector_of(d).is_some_and(|s| s.matches(labels)))
        .map(|d| ObjectKey::of(d.as_ref()))
        .collect()
}

/// The Deployments whose writes an update from `old` to `new` may show: the controller after
/// it, and the one before it if that changed (a release is the old controller's write).
fn writers(old: &ReplicaSet, new: &ReplicaSet) -> Vec<ObjectKey> {
    let (before, after) = (controller_key(old), controller_key(new));
    let mut keys: Vec<ObjectKey> = after.clone().into_iter().collect();
    if before != after {
        keys.extend(before);
    }
    keys
}

/// The loop's ReplicaSet handler: marks writes observed, then enqueues.
pub(super) struct ReplicaSetEvents {
    pub(super) expectations: Arc<Expectations>,
    pub(super) deployments: ObjectCache<Deployment>,
    pub(super) enqueuer: Enqueuer<ObjectKey>,
}

impl ReplicaSetEvents {
    /// Marks what `rs` shows as observed for the Deployment `owner` (which wrote it, possibly
    /// to release it: so the controller before an update is told too).
    fn observe(&self, owner: Option<ObjectKey>, rs: &ReplicaSet) {
        if let (Some(d), Some(name)) = (owner, rs.metadata.name.as_deref()) {
            self.expectations
                .observed(&d, name, rs.metadata.resource_version.as_deref());
        }
    }

    fn enqueue(&self, rs: &ReplicaSet) {
        for key in deployments_for_replicaset(&self.deployments, rs) {
            self.enqueuer.add(key);
        }
    }
}

impl EventHandler<ReplicaSet> for ReplicaSetEvents {
    fn on_add(&self, rs: &Arc<ReplicaSet>, _in_initial_list: bool) {
        self.observe(controller_key(rs), rs);
        self.enqueue(rs);
    }

    fn on_update(&self, old: &Arc<ReplicaSet>, new: &Arc<ReplicaSet>) {
        for owner in writers(old, new) {
            self.observe(Some(owner), new);
        }
        if controller_key(old) != controller_key(new) {
            self.enqueue(old);
        }
        self.enqueue(new);
    }

    fn on_delete(&self, deleted: &Deleted<ReplicaSet>) {
        let rs = deleted.object();
        if let (Some(d), Some(name)) = (controller_key(rs), rs.metadata.name.as_deref()) {
            self.expectations.observed_gone(&d, name);
        }
        self.enqueue(rs);
    }
}

/// The loop's pod handler: a deleted pod wakes its Recreate Deployment.
pub(super) struct PodDeletions {
    pub(super) replicasets: ObjectCache<ReplicaSet>,
    pub(super) deployments: ObjectCache<Deployment>,
    pub(super) enqueuer: Enqueuer<ObjectKey>,
}

impl EventHandler<Pod> for PodDeletions {
    fn on_delete(&self, deleted: &Deleted<Pod>) {
        let pod = deleted.object();
        let Some(owner) = controller_ref(&pod.metadata).filter(|r| r.kind == "ReplicaSet") else {
            return;
        };
        let rs_key = ObjectKey {
            namespace: pod.metadata.namespace.clone(),
            name: owner.name.clone(),
        };
        let Some(d_key) = self
            .replicasets
            .get(&rs_key)
            .and_then(|rs| controller_key(&rs))
        else {
            return;
        };
        if self
            .deployments
            .get(&d_key)
            .is_some_and(|d| Strategy::of(&d) == Strategy::Recreate)
        {
            self.enqueuer.add(d_key);
        }
    }
}

/// Forgets the expectations of deleted Deployments.
pub(super) struct ForgetDeleted {
    pub(super) expectations: Arc<Expectations>,
}

impl EventHandler<Deployment> for ForgetDeleted {
    fn on_delete(&self, deleted: &Deleted<Deployment>) {
        self.expectations
            .forget(&ObjectKey::of(deleted.object().as_ref()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn controlled_by(deployment: Option<&str>) -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.name = Some("web-1".into());
        rs.metadata.namespace = Some("ns".into());
        rs.metadata.owner_references = deployment.map(|name| {
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: name.into(),
                uid: format!("uid-{name}"),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
        rs
    }

    // Regression: a release was never marked observed (the released ReplicaSet has no
    // controller any more), so the Deployment that released it waited out the expectation.
    #[test]
    fn a_release_should_be_observed_for_the_old_controller() {
        let web = ObjectKey::namespaced("ns", "web");
        let released = writers(&controlled_by(Some("web")), &controlled_by(None));
        assert_eq!(released, std::slice::from_ref(&web));
        let adopted = writers(&controlled_by(None), &controlled_by(Some("web")));
        assert_eq!(adopted, std::slice::from_ref(&web));
        let same = writers(&controlled_by(Some("web")), &controlled_by(Some("web")));
        assert_eq!(same, [web]);
        assert!(writers(&controlled_by(None), &controlled_by(None)).is_empty());
    }
}
