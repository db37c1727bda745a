//! How pod and revision events reach the StatefulSet loop: the pod index by controller UID,
//! and the mapping from a pod (or a ControllerRevision) to the StatefulSets that must look at
//! it — its controller, or for an orphan every StatefulSet of its namespace selecting it.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use setpoint_runtime::owner::{controller_ref, controller_ref_of_kind};
use setpoint_runtime::{IndexFn, ObjectCache, ObjectKey};

use super::sync::selector_of;

/// The pod cache index filing each pod under its controller's UID.
pub(super) const BY_CONTROLLER_UID: &str = "statefulset.setpoint.dev/controller-uid";

/// The index function of [`BY_CONTROLLER_UID`].
pub(super) fn controller_uid_index() -> IndexFn<Pod> {
    Arc::new(|pod: &Pod| {
        controller_ref(&pod.metadata)
            .map(|r| vec![r.uid.clone()])
            .unwrap_or_default()
    })
}

/// The StatefulSets to sync when an object with metadata `meta` changes: its controller if a
/// StatefulSet controls it; for an orphan that is not being deleted, every StatefulSet of its
/// namespace selecting it.
pub(super) fn sets_for(sets: &ObjectCache<StatefulSet>, meta: &ObjectMeta) -> Vec<ObjectKey> {
    if controller_ref(meta).is_some() {
        return controller_ref_of_kind::<StatefulSet>(meta)
            .map(|r| ObjectKey {
                namespace: meta.namespace.clone(),
                name: r.name.clone(),
            })
            .into_iter()
            .collect();
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
