//! What a pod's PersistentVolumeClaims ask of its node (kube-scheduler's VolumeBinding plugin,
//! reduced to local volumes):
//! - a claim that does not exist, or is unbound in a class that binds at once (`Immediate`),
//!   makes the pod unschedulable until that changes;
//! - a bound claim confines the pod to the nodes its volume's `nodeAffinity` allows;
//! - an unbound claim of a `WaitForFirstConsumer` class lets the pod go anywhere, and once a
//!   node is chosen the claim is annotated `volume.kubernetes.io/selected-node` with it, for
//!   the provisioner to make the volume there; the pod is bound at once (its node's agent
//!   waits for the claim to be bound before starting containers).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams};
use parking_lot::Mutex;
use setpoint_runtime::{Client, Deleted, Enqueuer, EventHandler, ObjectCache, ObjectKey};

use super::cache::Cache;

/// The claim annotation naming the node the scheduler chose for its first consumer.
pub(crate) const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// The caches the volume checks read.
#[derive(Clone)]
pub(super) struct VolumeCaches {
    pub(super) claims: ObjectCache<PersistentVolumeClaim>,
    pub(super) volumes: ObjectCache<PersistentVolume>,
    pub(super) classes: ObjectCache<StorageClass>,
}

/// What a pod's claims ask of its node.
#[derive(Debug, Default)]
pub(super) struct VolumeNeeds {
    /// Why no node can take the pod now (a missing claim, an unbound `Immediate` claim).
    pub(super) blocked: Option<String>,
    /// Node affinities of bound volumes: a node must satisfy each.
    pub(super) affinities: Vec<NodeSelector>,
    /// Unbound `WaitForFirstConsumer` claims without a selected node, to annotate.
    pub(super) to_select: Vec<ObjectKey>,
}

impl VolumeNeeds {
    /// Whether `node` satisfies every bound volume's node affinity.
    pub(super) fn allows(&self, node: &Node) -> bool {
        self.affinities.iter().all(|selector| {
            selector
                .node_selector_terms
                .iter()
                .any(|term| super::filter::term_matches_node(term, node))
        })
    }
}

/// The needs of `pod`'s claims.
pub(super) fn needs(caches: &VolumeCaches, pod: &Pod) -> VolumeNeeds {
    let mut out = VolumeNeeds::default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(source) = &volume.persistent_volume_claim else {
            continue;
        };
        let key = ObjectKey::namespaced(namespace, &source.claim_name);
        let Some(claim) = caches.claims.get(&key) else {
            out.blocked = Some(format!(
                "persistentvolumeclaim \"{}\" not found",
                source.claim_name
            ));
            return out;
        };
        if claim.metadata.deletion_timestamp.is_some() {
            out.blocked = Some(format!(
                "persistentvolumeclaim \"{}\" is being deleted",
                source.claim_name
            ));
            return out;
        }
        let spec = claim.spec.as_ref();
        if let Some(volume_name) = spec.and_then(|s| s.volume_name.as_deref()) {
            let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
            match caches.volumes.get(&ObjectKey::cluster(volume_name)) {
                Some(volume) if bound => {
                    if let Some(required) = volume
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_affinity.as_ref())
                        .and_then(|a| a.required.clone())
                    {
                        out.affinities.push(required);
                    }
                }
                _ => {
                    out.blocked =
                        Some("pod has unbound immediate PersistentVolumeClaims".to_owned());
                    return out;
                }
            }
            continue;
        }
        let class = spec.and_then(|s| s.storage_class_name.as_deref());
        let wait = class
            .and_then(|c| caches.classes.get(&ObjectKey::cluster(c)))
            .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
        if !wait {
            out.blocked = Some("pod has unbound immediate PersistentVolumeClaims".to_owned());
            return out;
        }
        let selected = claim
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(SELECTED_NODE));
        if !selected {
            out.to_select.push(key);
        }
    }
    out
}

/// Annotates each claim with the chosen node.
pub(super) async fn select_node(
    client: &Client,
    claims: &[ObjectKey],
    node: &str,
) -> Result<(), kube::Error> {
    for key in claims {
        let namespace = key.namespace.as_deref().unwrap_or("default");
        client
            .namespaced_api::<PersistentVolumeClaim>(namespace)
            .patch(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({
                    "metadata": {"annotations": {SELECTED_NODE: node}}
                })),
            )
            .await?;
    }
    Ok(())
}

/// Claim and volume events: a pod waiting for a claim may now fit.
pub(super) struct VolumeEvents {
    pub(super) cache: Arc<Mutex<Cache>>,
    pub(super) queue: Enqueuer<ObjectKey>,
}

impl VolumeEvents {
    fn requeue(&self) {
        let keys = self.cache.lock().take_unschedulable();
        for key in keys {
            self.queue.add(key);
        }
    }
}

impl<K: Send + Sync + 'static> EventHandler<K> for VolumeEvents {
    fn on_add(&self, _object: &Arc<K>, in_initial_list: bool) {
        if !in_initial_list {
            self.requeue();
        }
    }

    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {
        self.requeue();
    }

    fn on_delete(&self, _deleted: &Deleted<K>) {}
}
