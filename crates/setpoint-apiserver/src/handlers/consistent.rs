//! Reads that must reflect every write acknowledged before them (a list without
//! `resourceVersion`, one with a revision the cache may not have reached, a continue token).
//!
//! They are served from the watch cache once it has caught up with the store. A cache on a
//! quiet resource catches up only if the store tells its watch that nothing changed
//! ([`Store::watch_progress_is_prompt`](setpoint_store::Store::watch_progress_is_prompt)).
//! Where it cannot (etcd before 3.4.31 / 3.5.13 with default flags), waiting would time out
//! with a 504, so the read goes to the store itself, as kube-apiserver reads etcd when etcd
//! cannot answer progress requests (its `ConsistentListFromCache` fallback). Watches are
//! unaffected: one from a revision ahead of the cache starts at once and skips the events up to
//! that revision when they arrive.

use setpoint_core::{ApiError, Revision};

use super::write::store_error_plain;
use super::{Api, CACHE_CATCH_UP};
use crate::registry::ResourceDef;
use crate::watchcache::{list_store, Objects};

impl Api {
    /// The objects of `def` at the store's current revision or later, and that revision:
    /// every write acknowledged before the call is in them.
    pub(crate) async fn consistent(
        &self,
        def: &ResourceDef,
    ) -> Result<(Objects, Revision), ApiError> {
        let current = self
            .store
            .current_revision()
            .await
            .map_err(store_error_plain)?;
        self.not_older_than(def, current).await
    }

    /// The objects of `def` at `revision` or later, and the revision they are at; `504` when
    /// the store has not reached `revision`.
    pub(crate) async fn not_older_than(
        &self,
        def: &ResourceDef,
        revision: Revision,
    ) -> Result<(Objects, Revision), ApiError> {
        let cache = self.cache(def)?;
        if self.store.watch_progress_is_prompt() || cache.has_reached(revision) {
            cache.wait_for(revision, CACHE_CATCH_UP).await?;
            return Ok(cache.snapshot());
        }
        let (objects, at) = list_store(def, self.store.as_ref(), None)
            .await
            .map_err(store_error_plain)?;
        if at < revision {
            return Err(ApiError::too_large_resource_version(
                revision.get(),
                at.get(),
            ));
        }
        Ok((objects, at))
    }

    /// The objects of `def` exactly as they were at `revision`; `410` if that is older than
    /// the cache's window (or the store's history), `504` if the store has not reached it.
    pub(crate) async fn exactly_at(
        &self,
        def: &ResourceDef,
        revision: Revision,
    ) -> Result<Objects, ApiError> {
        let cache = self.cache(def)?;
        if self.store.watch_progress_is_prompt() || cache.has_reached(revision) {
            cache.wait_for(revision, CACHE_CATCH_UP).await?;
            return cache.snapshot_at(revision);
        }
        list_store(def, self.store.as_ref(), Some(revision))
            .await
            .map(|(objects, _)| objects)
            .map_err(store_error_plain)
    }
}
