//! Drift at once: a watch on every kind a Sync applied, so a change to a managed object
//! enqueues its Sync right away instead of at the next `interval`.
//!
//! One metadata-only informer per resource (group, version, plural), started lazily the
//! first time a reconcile applies an object of that kind, selecting only objects that carry
//! the ownership label, and shared by every Sync of the process (the shared
//! `InformerFactory`'s). Its handler maps an object's ownership labels to the Sync's key. It
//! enqueues on adds, deletes (someone deleted a managed object, or removed its label) and on
//! updates that can be drift: a new generation (a spec change), changed labels or
//! annotations, or any change to an object without generations (a ConfigMap's data). Status
//! updates of generation-tracking objects are not drift and are skipped, so a rolling
//! Deployment does not re-run its Sync at every status write.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use parking_lot::Mutex;
use setpoint_runtime::{
    Deleted, Enqueuer, EventHandler, HandlerRegistration, InformerFactory, InformerOptions,
    ObjectCache, ObjectKey,
};

use crate::kinds::{SYNC_NAMESPACE_LABEL, SYNC_NAME_LABEL};

type Meta = PartialObjectMeta<DynamicObject>;

/// The drift watches of one loop.
pub(crate) struct DriftWatches {
    factory: InformerFactory,
    /// The loop's queue, set when the controller starts.
    enqueuer: Arc<OnceLock<Enqueuer<ObjectKey>>>,
    /// The cache of every resource watched, by `group/version/plural`.
    watched: Mutex<HashMap<String, ObjectCache<Meta>>>,
    registrations: Mutex<Vec<HandlerRegistration>>,
}

impl DriftWatches {
    /// Watches made from `factory`, enqueuing through `enqueuer` once it is set.
    pub(crate) fn new(
        factory: InformerFactory,
        enqueuer: Arc<OnceLock<Enqueuer<ObjectKey>>>,
    ) -> DriftWatches {
        DriftWatches {
            factory,
            enqueuer,
            watched: Mutex::new(HashMap::new()),
            registrations: Mutex::new(Vec::new()),
        }
    }

    /// Watches `resource`, unless it is watched already.
    pub(crate) fn watch(&self, resource: &ApiResource) {
        let key = key_of(resource);
        let mut watched = self.watched.lock();
        if watched.contains_key(&key) {
            return;
        }
        let options = InformerOptions {
            label_selector: Some(SYNC_NAME_LABEL.to_owned()),
            ..InformerOptions::default()
        }
        .strip_managed_fields();
        let informer = self.factory.dynamic_metadata_informer(resource, options);
        watched.insert(key, informer.store());
        drop(watched);
        let registration = informer.add_handler(EnqueueSync {
            enqueuer: self.enqueuer.clone(),
        });
        self.registrations.lock().push(registration);
        self.factory.start();
        tracing::debug!(group = %resource.group, plural = %resource.plural, "gitops-sync watches for drift");
    }

    /// The `resourceVersion` the drift watch of `resource` has cached for an object (`None`:
    /// not watched, not synced yet, or no such labelled object).
    pub(crate) fn resource_version(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<String> {
        let cache = self.watched.lock().get(&key_of(resource))?.clone();
        if !cache.is_synced() {
            return None;
        }
        let key = match namespace {
            Some(ns) => ObjectKey::namespaced(ns, name),
            None => ObjectKey::cluster(name),
        };
        cache.get(&key)?.metadata.resource_version.clone()
    }
}

fn key_of(resource: &ApiResource) -> String {
    format!(
        "{}/{}/{}",
        resource.group, resource.version, resource.plural
    )
}

/// Enqueues the Sync named by an object's ownership labels.
struct EnqueueSync {
    enqueuer: Arc<OnceLock<Enqueuer<ObjectKey>>>,
}

impl EnqueueSync {
    fn enqueue(&self, object: &Meta) {
        let Some(labels) = object.metadata.labels.as_ref() else {
            return;
        };
        let (Some(name), Some(namespace)) = (
            labels.get(SYNC_NAME_LABEL),
            labels.get(SYNC_NAMESPACE_LABEL),
        ) else {
            return;
        };
        if let Some(enqueuer) = self.enqueuer.get() {
            enqueuer.add(ObjectKey::namespaced(namespace.clone(), name.clone()));
        }
    }
}

/// Whether an update can be drift (see the module docs).
fn is_drift(old: &Meta, new: &Meta) -> bool {
    let (old, new) = (&old.metadata, &new.metadata);
    if old.resource_version == new.resource_version {
        return false;
    }
    match (old.generation, new.generation) {
        (Some(a), Some(b)) => {
            a != b || old.labels != new.labels || old.annotations != new.annotations
        }
        _ => true,
    }
}

impl EventHandler<Meta> for EnqueueSync {
    fn on_add(&self, object: &Arc<Meta>, _in_initial_list: bool) {
        self.enqueue(object);
    }

    fn on_update(&self, old: &Arc<Meta>, new: &Arc<Meta>) {
        if is_drift(old, new) {
            self.enqueue(old);
            self.enqueue(new);
        }
    }

    fn on_delete(&self, deleted: &Deleted<Meta>) {
        self.enqueue(deleted.object());
    }
}
