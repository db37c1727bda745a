//! How events reach the DaemonSet loop: the pod index by controller UID; the pod handler that
//! lowers expectations as creates and deletes show up and then wakes the pod's DaemonSet (or,
//! for an orphan, every DaemonSet of its namespace selecting it); the node handler that wakes
//! every DaemonSet when a node comes, goes, or changes what placement reads (labels, taints,
//! readiness); and forgetting the expectations of deleted DaemonSets.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use setpoint_runtime::owner::{controller_ref, controller_ref_of_kind};
use setpoint_runtime::{Deleted, Enqueuer, EventHandler, IndexFn, ObjectCache, ObjectKey};

use super::expectations::Expectations;
use super::sync::selector_of;

/// The pod cache index filing each pod under its controller's UID.
pub(super) const BY_CONTROLLER_UID: &str = "daemonset.setpoint.dev/controller-uid";

/// The index function of [`BY_CONTROLLER_UID`].
pub(super) fn controller_uid_index() -> IndexFn<Pod> {
    Arc::new(|pod: &Pod| {
        controller_ref(&pod.metadata)
            .map(|r| vec![r.uid.clone()])
            .unwrap_or_default()
    })
}

/// The DaemonSet controlling an object with metadata `meta`, if one does.
fn daemonset_of(meta: &ObjectMeta) -> Option<ObjectKey> {
    controller_ref_of_kind::<DaemonSet>(meta).map(|r| ObjectKey {
        namespace: meta.namespace.clone(),
        name: r.name.clone(),
    })
}

/// The DaemonSets to sync when an object with metadata `meta` changes: its controller, or for
/// an orphan that is not being deleted every DaemonSet of its namespace selecting it.
pub(super) fn daemonsets_for(sets: &ObjectCache<DaemonSet>, meta: &ObjectMeta) -> Vec<ObjectKey> {
    if controller_ref(meta).is_some() {
        return daemonset_of(meta).into_iter().collect();
    }
    let (Some(namespace), None) = (&meta.namespace, &meta.deletion_timestamp) else {
        return Vec::new();
    };
    let empty = Default::default();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    sets.list_namespace(namespace)
        .iter()
        .filter(|s| selector_of(s).is_some_and(|sel| sel.matches(labels)))
        .map(|s| ObjectKey::of(s.as_ref()))
        .collect()
}

/// The loop's pod handler: expectations first, then the DaemonSets to sync.
pub(super) struct PodEvents {
    pub(super) expectations: Arc<Expectations>,
    pub(super) sets: ObjectCache<DaemonSet>,
    pub(super) enqueuer: Enqueuer<ObjectKey>,
}

impl PodEvents {
    fn deleted(&self, pod: &Pod) {
        if let Some(ds) = daemonset_of(&pod.metadata) {
            self.expectations
                .deletion_observed(&ds, &ObjectKey::of(pod));
        }
    }

    fn enqueue(&self, pod: &Pod) {
        for key in daemonsets_for(&self.sets, &pod.metadata) {
            self.enqueuer.add(key);
        }
    }
}

impl EventHandler<Pod> for PodEvents {
    fn on_add(&self, pod: &Arc<Pod>, _in_initial_list: bool) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.deleted(pod);
        } else if let Some(ds) = daemonset_of(&pod.metadata) {
            self.expectations.creations_observed(&ds, 1);
        }
        self.enqueue(pod);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if new.metadata.deletion_timestamp.is_some() && old.metadata.deletion_timestamp.is_none() {
            self.deleted(new);
        }
        if !Arc::ptr_eq(old, new) && old.metadata.owner_references != new.metadata.owner_references
        {
            self.enqueue(old);
        }
        self.enqueue(new);
    }

    fn on_delete(&self, deleted: &Deleted<Pod>) {
        self.deleted(deleted.object());
        self.enqueue(deleted.object());
    }
}

/// What placement reads off a node: labels, taints, whether it is ready.
fn placement_view(node: &Node) -> impl PartialEq + '_ {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    (
        &node.metadata.labels,
        node.spec.as_ref().and_then(|s| s.taints.as_ref()),
        ready,
    )
}

/// The loop's node handler: wakes every DaemonSet when placement may have changed.
pub(super) struct NodeEvents {
    pub(super) sets: ObjectCache<DaemonSet>,
    pub(super) enqueuer: Enqueuer<ObjectKey>,
}

impl NodeEvents {
    fn enqueue_all(&self) {
        for ds in self.sets.list() {
            self.enqueuer.add(ObjectKey::of(ds.as_ref()));
        }
    }
}

impl EventHandler<Node> for NodeEvents {
    fn on_add(&self, _node: &Arc<Node>, _in_initial_list: bool) {
        self.enqueue_all();
    }

    fn on_update(&self, old: &Arc<Node>, new: &Arc<Node>) {
        if placement_view(old) != placement_view(new) {
            self.enqueue_all();
        }
    }

    fn on_delete(&self, _deleted: &Deleted<Node>) {
        self.enqueue_all();
    }
}

/// Forgets the expectations of deleted DaemonSets.
pub(super) struct ForgetDeleted {
    pub(super) expectations: Arc<Expectations>,
}

impl EventHandler<DaemonSet> for ForgetDeleted {
    fn on_add(&self, _ds: &Arc<DaemonSet>, _in_initial_list: bool) {}

    fn on_update(&self, _old: &Arc<DaemonSet>, _new: &Arc<DaemonSet>) {}

    fn on_delete(&self, deleted: &Deleted<DaemonSet>) {
        self.expectations
            .forget(&ObjectKey::of(deleted.object().as_ref()));
    }
}
