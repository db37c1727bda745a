//! The graph builder: an informer handler per watched resource that turns what the informer
//! sees into graph changes and hands the resulting work to the queues.

use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use setpoint_runtime::{Deleted, EventHandler};

use super::graph::{Deletion, Identity, Observation, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use super::Collector;

/// What the collector caches of every object: its metadata.
type Metadata = PartialObjectMeta<DynamicObject>;

/// Feeds one resource's objects into the collector's graph.
pub(super) struct GraphBuilder {
    pub(super) resource: ApiResource,
    pub(super) collector: Arc<Collector>,
}

impl GraphBuilder {
    fn observe(&self, object: &Metadata) {
        let Some(observation) = observation(&self.resource, object) else {
            return;
        };
        let work = self.collector.graph.lock().observe(observation);
        self.collector.schedule(work);
    }
}

impl EventHandler<Metadata> for GraphBuilder {
    fn on_add(&self, object: &Arc<Metadata>, _in_initial_list: bool) {
        self.observe(object);
    }

    fn on_update(&self, _old: &Arc<Metadata>, new: &Arc<Metadata>) {
        self.observe(new);
    }

    fn on_delete(&self, deleted: &Deleted<Metadata>) {
        let Some(uid) = deleted.object().metadata.uid.as_deref() else {
            return;
        };
        let work = self.collector.graph.lock().remove(uid);
        self.collector.schedule(work);
    }
}

/// What the graph keeps of an object of `resource`; `None` without a name or uid.
fn observation(resource: &ApiResource, object: &Metadata) -> Option<Observation> {
    let meta = &object.metadata;
    let has = |f: &str| meta.finalizers.iter().flatten().any(|x| x == f);
    let being_deleted = meta.deletion_timestamp.is_some();
    let deletion = match (being_deleted, has(FOREGROUND_FINALIZER)) {
        (false, _) => Deletion::Live,
        (true, false) => Deletion::BeingDeleted,
        (true, true) => Deletion::DeletingDependents,
    };
    Some(Observation {
        identity: Identity {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
            uid: meta.uid.clone()?,
        },
        owners: meta.owner_references.clone().unwrap_or_default(),
        deletion,
        orphaning: being_deleted && has(ORPHAN_FINALIZER),
    })
}
