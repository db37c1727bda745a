//! The attempt-to-orphan worker: an owner deleted with the `orphan` finalizer has its
//! references removed from every dependent the graph knows, then loses the finalizer (and,
//! with no other finalizer, goes).

use super::attempt_delete::describe;
use super::graph::ORPHAN_FINALIZER;
use super::live::{has_finalizer, LiveError};
use super::Collector;

impl Collector {
    /// Orphans the dependents of the owner `uid`.
    pub(super) async fn attempt_to_orphan(&self, uid: &str) -> Result<(), LiveError> {
        let Some(owner) = self.graph.lock().view(uid) else {
            return Ok(());
        };
        let Some(latest) = self.live.get(&owner.identity).await? else {
            return Ok(());
        };
        if latest.metadata.deletion_timestamp.is_none() || !has_finalizer(&latest, ORPHAN_FINALIZER)
        {
            return Ok(());
        }
        for dependent in &owner.dependents {
            let Some(object) = self.live.get(dependent).await? else {
                continue;
            };
            let owners = object.metadata.owner_references.clone().unwrap_or_default();
            if !owners.iter().any(|r| r.uid == uid) {
                continue;
            }
            let keep: Vec<_> = owners.into_iter().filter(|r| r.uid != uid).collect();
            tracing::info!(object = %describe(dependent), owner = %describe(&owner.identity), "orphaning");
            self.live
                .set_owner_references(dependent, &object, &keep)
                .await?;
        }
        tracing::info!(object = %describe(&owner.identity), "dependents orphaned; removing the orphan finalizer");
        self.live
            .remove_finalizer(&owner.identity, &latest, ORPHAN_FINALIZER)
            .await
    }
}
