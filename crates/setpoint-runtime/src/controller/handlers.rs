//! The event handlers a controller adds to its informers. They only map events to keys and
//! enqueue them (through an add-only [`Enqueuer`]); all work happens in the reconcile.
//!
//! - [`EnqueueSelf`], on the main informer: the object's own key, when the predicates pass.
//! - [`EnqueueOwner`], on an owned kind's informer: the key of the object's controller (see
//!   `owner`), for the old and the new state of an update — an object whose controller
//!   changed must have both the old and the new controller reconciled.
//! - [`EnqueueMapped`], on a watched kind's informer: whatever keys the user's mapper returns,
//!   likewise for both states of an update.

use std::marker::PhantomData;
use std::sync::Arc;

use kube::Resource;

use super::predicate::{all_pass, Predicate};
use crate::owner::OwnerKind;
use crate::{Deleted, Enqueuer, EventHandler, ObjectKey};

/// Whether the controller asked for periodic resyncs, which decides what an `on_update(obj,
/// obj)` (a resync, or a relist that found the object unchanged) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resync {
    /// No resync was asked for: an unchanged object is an update like any other, filtered by
    /// the predicates.
    Off,
    /// Resyncs were asked for: an unchanged object is enqueued whatever the predicates say,
    /// since reconciling everything is the point of a resync.
    On,
}

/// Enqueues the main resource's own key.
pub(crate) struct EnqueueSelf<K> {
    pub(crate) enqueuer: Enqueuer<ObjectKey>,
    pub(crate) predicates: Vec<Predicate<K>>,
    pub(crate) resync: Resync,
}

impl<K: Resource + Send + Sync + 'static> EventHandler<K> for EnqueueSelf<K> {
    fn on_add(&self, object: &Arc<K>, _in_initial_list: bool) {
        if all_pass(&self.predicates, None, object) {
            self.enqueuer.add(ObjectKey::of(object.as_ref()));
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let resynced = Arc::ptr_eq(old, new) && self.resync == Resync::On;
        if resynced || all_pass(&self.predicates, Some(old), new) {
            self.enqueuer.add(ObjectKey::of(new.as_ref()));
        }
    }

    fn on_delete(&self, deleted: &Deleted<K>) {
        self.enqueuer.add(ObjectKey::of(deleted.object().as_ref()));
    }
}

/// Enqueues the controller (ownerReference with `controller: true`) of owned objects.
pub(crate) struct EnqueueOwner {
    pub(crate) enqueuer: Enqueuer<ObjectKey>,
    pub(crate) owner: OwnerKind,
}

impl EnqueueOwner {
    fn enqueue<O: Resource>(&self, object: &O) {
        if let Some(key) = self.owner.controller_of(object.meta()) {
            self.enqueuer.add(key);
        }
    }
}

impl<O: Resource + Send + Sync + 'static> EventHandler<O> for EnqueueOwner {
    fn on_add(&self, object: &Arc<O>, _in_initial_list: bool) {
        self.enqueue(object.as_ref());
    }

    fn on_update(&self, old: &Arc<O>, new: &Arc<O>) {
        self.enqueue(old.as_ref());
        self.enqueue(new.as_ref());
    }

    fn on_delete(&self, deleted: &Deleted<O>) {
        self.enqueue(deleted.object().as_ref());
    }
}

/// Enqueues the keys a user function maps a watched object to.
pub(crate) struct EnqueueMapped<O, F> {
    enqueuer: Enqueuer<ObjectKey>,
    mapper: F,
    _watched: PhantomData<fn(&O)>,
}

impl<O, F, I> EnqueueMapped<O, F>
where
    F: Fn(&O) -> I,
    I: IntoIterator<Item = ObjectKey>,
{
    pub(crate) fn new(enqueuer: Enqueuer<ObjectKey>, mapper: F) -> Self {
        EnqueueMapped {
            enqueuer,
            mapper,
            _watched: PhantomData,
        }
    }

    fn enqueue(&self, object: &O) {
        for key in (self.mapper)(object) {
            self.enqueuer.add(key);
        }
    }
}

impl<O, F, I> EventHandler<O> for EnqueueMapped<O, F>
where
    O: Send + Sync + 'static,
    F: Fn(&O) -> I + Send + Sync + 'static,
    I: IntoIterator<Item = ObjectKey>,
{
    fn on_add(&self, object: &Arc<O>, _in_initial_list: bool) {
        self.enqueue(object);
    }

    fn on_update(&self, old: &Arc<O>, new: &Arc<O>) {
        if !Arc::ptr_eq(old, new) {
            self.enqueue(old);
        }
        self.enqueue(new);
    }

    fn on_delete(&self, deleted: &Deleted<O>) {
        self.enqueue(deleted.object());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkQueue;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    fn deployment(name: &str, generation: i64) -> Arc<Deployment> {
        Arc::new(Deployment {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn replicaset(owner: &str) -> Arc<ReplicaSet> {
        Arc::new(ReplicaSet {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(format!("{owner}-rs")),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    name: owner.into(),
                    uid: "u".into(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// Every key queued now, in order, each claimed and released.
    async fn drain(q: &WorkQueue<ObjectKey>) -> Vec<String> {
        let mut keys = Vec::new();
        while !q.is_empty() {
            let claim = q.next().await.expect("queued");
            keys.push(claim.key().to_string());
            claim.done();
        }
        keys
    }

    #[tokio::test]
    async fn enqueue_self_should_apply_predicates_to_adds_and_updates_only() {
        let q = WorkQueue::new();
        let h = EnqueueSelf {
            enqueuer: q.enqueuer(),
            predicates: vec![Predicate::generation_changed()],
            resync: Resync::Off,
        };
        let (g1, g1_again, g2) = (deployment("d", 1), deployment("d", 1), deployment("d", 2));
        h.on_add(&g1, true);
        assert_eq!(drain(&q).await, ["ns/d"]);
        h.on_update(&g1, &g1_again);
        h.on_update(&g1, &g1);
        assert!(
            drain(&q).await.is_empty(),
            "same generation, no resync asked"
        );
        h.on_update(&g1, &g2);
        assert_eq!(drain(&q).await, ["ns/d"]);
        h.on_delete(&Deleted::Final(g2));
        assert_eq!(drain(&q).await, ["ns/d"], "deletes always pass");
    }

    #[tokio::test]
    async fn enqueue_self_should_let_resyncs_through_when_asked_for() {
        let q = WorkQueue::new();
        let h = EnqueueSelf {
            enqueuer: q.enqueuer(),
            predicates: vec![Predicate::generation_changed()],
            resync: Resync::On,
        };
        let (g1, g1_again) = (deployment("d", 1), deployment("d", 1));
        h.on_update(&g1, &g1);
        assert_eq!(drain(&q).await, ["ns/d"], "a resync passes");
        h.on_update(&g1, &g1_again);
        assert!(
            drain(&q).await.is_empty(),
            "a real update is still filtered"
        );
    }

    #[tokio::test]
    async fn enqueue_owner_should_enqueue_the_owners_of_old_and_new() {
        let q = WorkQueue::new();
        let h = EnqueueOwner {
            enqueuer: q.enqueuer(),
            owner: OwnerKind::of::<Deployment>(),
        };
        h.on_add(&replicaset("a"), false);
        assert_eq!(drain(&q).await, ["ns/a"]);
        h.on_update(&replicaset("a"), &replicaset("b"));
        assert_eq!(drain(&q).await, ["ns/a", "ns/b"]);
        h.on_delete(&Deleted::FinalStateUnknown(replicaset("c")));
        assert_eq!(drain(&q).await, ["ns/c"]);
        let unowned = Arc::new(ReplicaSet::default());
        h.on_add(&unowned, false);
        assert!(drain(&q).await.is_empty());
    }

    #[tokio::test]
    async fn enqueue_mapped_should_enqueue_every_mapped_key() {
        let q = WorkQueue::new();
        let h = EnqueueMapped::new(q.enqueuer(), |d: &Deployment| {
            let name = d.metadata.name.clone().unwrap_or_default();
            [
                ObjectKey::cluster(format!("{name}-1")),
                ObjectKey::cluster(format!("{name}-2")),
            ]
        });
        h.on_add(&deployment("x", 1), false);
        assert_eq!(drain(&q).await, ["x-1", "x-2"]);
        h.on_update(&deployment("x", 1), &deployment("y", 1));
        assert_eq!(drain(&q).await, ["x-1", "x-2", "y-1", "y-2"]);
        h.on_delete(&Deleted::Final(deployment("z", 1)));
        assert_eq!(drain(&q).await, ["z-1", "z-2"]);
    }
}
