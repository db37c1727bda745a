//! How pod events reach the loop: the pod index by controller UID, the handler that lowers
//! expectations as creates and deletes show up in the cache, the mapping from a pod to the
//! ReplicaSets that must look at it (its controller, or — for an orphan — every ReplicaSet of
//! its namespace whose selector matches it, which may adopt it), and forgetting the
//! expectations of deleted ReplicaSets.

use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use setpoint_core::LabelSelector;
use setpoint_runtime::owner::controller_ref;
use setpoint_runtime::{Deleted, Enqueuer, EventHandler, IndexFn, ObjectCache, ObjectKey};

use super::expectations::Expectations;
use super::kind::Replicated;
use super::pods::replicaset_of;

/// The pod cache index filing each pod under its controller's UID.
pub(super) const BY_CONTROLLER_UID: &str = "replicaset.setpoint.dev/controller-uid";

/// The index function of [`BY_CONTROLLER_UID`].
pub(super) fn controller_uid_index() -> IndexFn<Pod> {
    Arc::new(|pod: &Pod| {
        controller_ref(&pod.metadata)
            .map(|r| vec![r.uid.clone()])
            .unwrap_or_default()
    })
}

/// The ReplicaSet's selector; `None` if it has none or it is invalid (such a ReplicaSet
/// selects nothing — the API server rejects both, so neither should be stored).
pub(super) fn selector_of<K: Replicated>(rs: &K) -> Option<LabelSelector> {
    let selector = rs.selector_json()?;
    let selector = LabelSelector::from_structured(&selector).ok()?;
    // An empty selector would select every pod of the namespace; Kubernetes refuses it too.
    (!selector.is_everything() && !selector.is_nothing()).then_some(selector)
}

/// The ReplicaSets to sync when `pod` changes: its controller if a ReplicaSet controls it;
/// for an orphan that is not being deleted, every ReplicaSet of its namespace selecting it.
pub(super) fn replicasets_for_pod<K: Replicated>(
    replicasets: &ObjectCache<K>,
    pod: &Pod,
) -> Vec<ObjectKey> {
    if controller_ref(&pod.metadata).is_some() {
        return replicaset_of::<K>(pod).into_iter().collect();
    }
    let (Some(namespace), None) = (&pod.metadata.namespace, &pod.metadata.deletion_timestamp)
    else {
        return Vec::new();
    };
    let empty = Default::default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    replicasets
        .list_namespace(namespace)
        .iter()
        .filter(|rs| selector_of(rs.as_ref()).is_some_and(|s| s.matches(labels)))
        .map(|rs| ObjectKey::of(rs.as_ref()))
        .collect()
}

/// Lowers expectations as the pod cache shows pods appear and go.
pub(super) struct ObservePods<K> {
    pub(super) expectations: Arc<Expectations>,
    pub(super) kind: PhantomData<fn() -> K>,
}

impl<K: Replicated> ObservePods<K> {
    fn deleted(&self, pod: &Pod) {
        if let Some(rs) = replicaset_of::<K>(pod) {
            self.expectations
                .deletion_observed(&rs, &ObjectKey::of(pod));
        }
    }
}

impl<K: Replicated> EventHandler<Pod> for ObservePods<K> {
    fn on_add(&self, pod: &Arc<Pod>, _in_initial_list: bool) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Seen for the first time already terminating (e.g. after a relist): as good as gone.
            self.deleted(pod);
        } else if let Some(rs) = replicaset_of::<K>(pod) {
            self.expectations.creation_observed(&rs);
        }
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if new.metadata.deletion_timestamp.is_some() && old.metadata.deletion_timestamp.is_none() {
            // A graceful deletion starts: the pod no longer counts, so the delete is observed
            // — for whichever ReplicaSet controlled it before and after.
            self.deleted(new);
            self.deleted(old);
        }
    }

    fn on_delete(&self, deleted: &Deleted<Pod>) {
        self.deleted(deleted.object());
    }
}

/// The loop's pod handler: lowers expectations ([`ObservePods`]) and only then enqueues the
/// ReplicaSets that must look at the pod ([`replicasets_for_pod`]; for an update, those of the
/// old and the new state). One handler, so a sync woken by a pod event always finds that event
/// already counted in the expectations.
pub(super) struct PodEvents<K: Replicated> {
    pub(super) observe: ObservePods<K>,
    pub(super) replicasets: ObjectCache<K>,
    pub(super) enqueuer: Enqueuer<ObjectKey>,
}

impl<K: Replicated> PodEvents<K> {
    fn enqueue(&self, pod: &Pod) {
        for key in replicasets_for_pod(&self.replicasets, pod) {
            self.enqueuer.add(key);
        }
    }
}

impl<K: Replicated> EventHandler<Pod> for PodEvents<K> {
    fn on_add(&self, pod: &Arc<Pod>, in_initial_list: bool) {
        self.observe.on_add(pod, in_initial_list);
        self.enqueue(pod);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.observe.on_update(old, new);
        if !Arc::ptr_eq(old, new) {
            self.enqueue(old);
        }
        self.enqueue(new);
    }

    fn on_delete(&self, deleted: &Deleted<Pod>) {
        self.observe.on_delete(deleted);
        self.enqueue(deleted.object());
    }
}

/// Forgets the expectations of deleted ReplicaSets.
pub(super) struct ForgetDeleted {
    pub(super) expectations: Arc<Expectations>,
}

impl<K: Replicated> EventHandler<K> for ForgetDeleted {
    fn on_add(&self, _rs: &Arc<K>, _in_initial_list: bool) {}

    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {}

    fn on_delete(&self, deleted: &Deleted<K>) {
        self.expectations
            .forget(&ObjectKey::of(deleted.object().as_ref()));
    }
}

#[cfg(test)]
mod tests {
    use super::super::pods::testing::pod;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned(name: &str, rs: &str) -> Arc<Pod> {
        let mut p = pod(name, "Pending", 0);
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: rs.into(),
            uid: format!("uid-{rs}"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        Arc::new(p)
    }

    #[test]
    fn observe_pods_should_lower_expectations_on_adds_and_deletes() {
        let expectations = Arc::new(Expectations::default());
        let h = ObservePods::<k8s_openapi::api::apps::v1::ReplicaSet> {
            expectations: expectations.clone(),
            kind: PhantomData,
        };
        let rs = ObjectKey::namespaced("ns", "web");
        expectations.expect_creations(&rs, 2);
        h.on_add(&owned("web-1", "web"), false);
        h.on_add(&owned("other-1", "other"), false);
        assert!(!expectations.satisfied(&rs));
        h.on_add(&owned("web-2", "web"), false);
        assert!(expectations.satisfied(&rs));

        expectations.expect_deletions(&rs, [ObjectKey::namespaced("ns", "web-1")]);
        h.on_update(&owned("web-1", "web"), &owned("web-1", "web"));
        assert!(!expectations.satisfied(&rs), "an update is not a delete");
        h.on_delete(&Deleted::FinalStateUnknown(owned("web-1", "web")));
        assert!(expectations.satisfied(&rs));
    }

    #[test]
    fn index_should_file_pods_under_their_controller_uid() {
        let index = controller_uid_index();
        assert_eq!(index(&owned("web-1", "web")), ["uid-web"]);
        assert!(index(&pod("orphan", "Pending", 0)).is_empty());
    }
}
