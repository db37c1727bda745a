//! The attempt-to-delete worker: decides, for one graph node, on the live objects, whether it
//! goes. A node is here because an owner of it went away, because it is an owner nobody has
//! seen yet (a virtual node, to verify), or because it waits for its dependents (foreground).
//!
//! - A virtual node whose object does not exist (or has another uid) is dropped from the graph,
//!   which sends its dependents here; one that exists but no informer has shown yet is retried.
//! - An owner deleting its dependents loses its `foregroundDeletion` finalizer once no
//!   dependent blocks it; until then its blocking dependents are sent here.
//! - A dependent is classified by its live owner references: *solid* (the owner exists and is
//!   not deleting its dependents), *dangling* (no object with that name and uid in the owner's
//!   namespace, or at cluster scope for a cluster-scoped kind), *waiting* (the owner exists
//!   and deletes its dependents in the foreground). With a solid owner, it only loses its
//!   references to the others; with none, it is deleted — in the foreground if a waiting
//!   owner needs its own dependents gone first, else as its own finalizers ask (background by
//!   default).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;

use super::graph::{
    Deletion, Identity, NodeView, Presence, FOREGROUND_FINALIZER, ORPHAN_FINALIZER,
};
use super::live::{has_finalizer, LiveError, Propagation};
use super::Collector;

/// What became of one attempt.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Nothing more to do until the graph changes.
    Done,
    /// Look again later (an owner seen live but not yet by an informer).
    Retry,
}

/// The state of one owner reference, from the live owner.
enum OwnerState {
    Solid,
    Dangling,
    Waiting,
}

impl Collector {
    /// Processes the node `uid`.
    pub(super) async fn attempt_to_delete(&self, uid: &str) -> Result<Outcome, LiveError> {
        let Some(node) = self.graph.lock().view(uid) else {
            return Ok(Outcome::Done);
        };
        // Being deleted is a one-way trip: wait for the deletion, then see to its dependents.
        if node.deletion == Deletion::BeingDeleted {
            return Ok(Outcome::Done);
        }
        let Some(latest) = self.live.get(&node.identity).await? else {
            tracing::debug!(object = %describe(&node.identity), "gone; checking its dependents");
            let work = match node.presence {
                // Only if still virtual: an informer may have shown it meanwhile.
                Presence::Virtual => self.graph.lock().remove_virtual(uid),
                // Deleted; its deletion event is on the way (and will find nothing to do).
                Presence::Observed => self.graph.lock().remove(uid),
            };
            self.schedule(work);
            return Ok(Outcome::Done);
        };
        if node.presence == Presence::Virtual {
            // It exists; the informer will show it. Until then, we know nothing of it.
            return Ok(Outcome::Retry);
        }
        if node.deletion == Deletion::DeletingDependents {
            return self.deleting_dependents(&node, &latest).await;
        }
        let owners = latest.metadata.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return Ok(Outcome::Done);
        }
        let (mut solid, mut dangling, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
        for r in &owners {
            let owner = Identity {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                namespace: node.identity.namespace.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            };
            let state = match self.live.get(&owner).await {
                Ok(None) => OwnerState::Dangling,
                Ok(Some(o)) if is_deleting_dependents(&o) => OwnerState::Waiting,
                Ok(Some(_)) => OwnerState::Solid,
                Err(e @ LiveError::NamespacedOwnerOfClusterScoped { .. }) => {
                    // Never resolves: leave the object alone, don't retry.
                    tracing::warn!(object = %describe(&node.identity), error = %e, "invalid owner reference");
                    return Ok(Outcome::Done);
                }
                Err(e) => return Err(e),
            };
            match state {
                OwnerState::Solid => solid.push(r),
                OwnerState::Dangling => dangling.push(r),
                OwnerState::Waiting => waiting.push(r),
            }
        }
        let id = &node.identity;
        if !solid.is_empty() {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(Outcome::Done);
            }
            // Keep the object for its solid owners; drop the references to the others.
            let keep: Vec<OwnerReference> = solid.into_iter().cloned().collect();
            tracing::info!(object = %describe(id), "removing references to owners that are gone or deleting");
            self.live.set_owner_references(id, &latest, &keep).await?;
            return Ok(Outcome::Done);
        }
        if !waiting.is_empty() && !node.dependents.is_empty() {
            if node.dependent_deleting_dependents {
                // A possible cycle of foreground deletions: stop blocking our owners first.
                let unblocked: Vec<OwnerReference> = owners
                    .iter()
                    .cloned()
                    .map(|mut r| {
                        if r.block_owner_deletion == Some(true) {
                            r.block_owner_deletion = Some(false);
                        }
                        r
                    })
                    .collect();
                self.live
                    .set_owner_references(id, &latest, &unblocked)
                    .await?;
            }
            tracing::info!(object = %describe(id), "deleting in the foreground: an owner waits for its dependents");
            self.live.delete(id, Propagation::Foreground).await?;
            return Ok(Outcome::Done);
        }
        let policy = if has_finalizer(&latest, ORPHAN_FINALIZER) {
            Propagation::Orphan
        } else if has_finalizer(&latest, FOREGROUND_FINALIZER) {
            Propagation::Foreground
        } else {
            Propagation::Background
        };
        tracing::info!(object = %describe(id), ?policy, "deleting: no owner remains");
        self.live.delete(id, policy).await?;
        Ok(Outcome::Done)
    }

    /// An owner deleting its dependents in the foreground: drop its finalizer once nothing
    /// blocks it, else send its blocking dependents to be deleted.
    async fn deleting_dependents(
        &self,
        node: &NodeView,
        latest: &DynamicObject,
    ) -> Result<Outcome, LiveError> {
        if node.blocking.is_empty() {
            if has_finalizer(latest, FOREGROUND_FINALIZER) {
                tracing::info!(object = %describe(&node.identity), "no blocking dependents remain; removing the foregroundDeletion finalizer");
                self.live
                    .remove_finalizer(&node.identity, latest, FOREGROUND_FINALIZER)
                    .await?;
            }
            return Ok(Outcome::Done);
        }
        for (dependent, deletion) in &node.blocking {
            if *deletion == Deletion::Live {
                self.delete_queue.add(dependent.uid.clone());
            }
        }
        Ok(Outcome::Done)
    }
}

/// Whether the owner waits for its dependents to go (foreground deletion).
fn is_deleting_dependents(owner: &DynamicObject) -> bool {
    owner.metadata.deletion_timestamp.is_some() && has_finalizer(owner, FOREGROUND_FINALIZER)
}

/// `Kind ns/name (uid)` for logs.
pub(super) fn describe(id: &Identity) -> String {
    let ns = id
        .namespace
        .as_deref()
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    format!("{} {ns}{} ({})", id.kind, id.name, id.uid)
}
