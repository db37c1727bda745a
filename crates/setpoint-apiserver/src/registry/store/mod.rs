//! The registry store: the storage rules every resource shares, between the HTTP handlers and
//! the [`Store`], as kube-apiserver's generic registry store holds them. One [`RegistryStore`]
//! serves one resource; it owns that resource's watch cache.
//!
//! - **Reads** (`read.rs`): get from the store; lists and watches from the watch cache at the
//!   revision `resourceVersion` asks for, consistent reads, continue tokens.
//! - **Create** (`create.rs`): server-set metadata, the kind's `prepare_create`, allocation
//!   (a service's cluster IP), name generation, validation, the namespace check, then a
//!   create-if-absent.
//! - **Update** (`update.rs`): the guaranteed update every PUT, PATCH, subresource write and
//!   server-made change goes through: read, change, keep what the client may not change,
//!   `prepare_update`, generation, validation, then a write conditional on the revision read,
//!   retried on conflict unless the client named a `resourceVersion`.
//! - **Delete** (`delete.rs`): preconditions, finalizers, propagation policies, graceful
//!   deletion, and delete-collection.
//!
//! The kind's strategy is called at fixed points of each; dry runs stop just before the write.
//! Objects of a resource with a [`Conversion`] (a CRD's webhook) are converted on every read
//! and write (`convert.rs`).
//! Admission (`admission.rs`) is called at fixed points too: mutation after the defaults,
//! validation after the kind's validation.
//! Errors are the API's ([`ApiError`]), mapped from the store's in one place ([`store_error`]).

pub(crate) mod admission;
mod convert;
mod create;
pub(crate) mod delete;
pub(crate) mod delete_options;
mod options;
mod read;
mod scale;
pub(crate) mod update;

use std::sync::Arc;
use std::time::Duration;

use setpoint_core::{ApiError, Reason};
use setpoint_store::{Store, StoreError};

pub(crate) use admission::{admitting, Admit, Operation};
pub(crate) use convert::{served_objects, Conversion};
pub(crate) use delete::Deleted;
pub(crate) use options::{dry_run_of, Continue, ListOptions, RvMatch};
pub(crate) use scale::ScaleChange;
pub(crate) use update::{Scope, Updated};

use super::ResourceDef;
use crate::watchcache::WatchCache;

/// How long a consistent read waits for the watch cache to catch up with the store.
pub(crate) const CACHE_CATCH_UP: Duration = Duration::from_secs(3);

/// The storage of one resource: its definition (and strategy), the store, and its watch cache.
pub(crate) struct RegistryStore {
    pub(crate) def: Arc<ResourceDef>,
    store: Arc<dyn Store>,
    cache: Arc<WatchCache>,
}

impl RegistryStore {
    /// Serves `def` from `store`, starting its watch cache (keeping `window` recent events).
    /// Must be called within a tokio runtime.
    pub(crate) fn start(def: Arc<ResourceDef>, store: Arc<dyn Store>, window: usize) -> Self {
        let cache = WatchCache::start(def.clone(), store.clone(), window);
        RegistryStore { def, store, cache }
    }

    /// The resource's watch cache.
    pub(crate) fn cache(&self) -> &Arc<WatchCache> {
        &self.cache
    }

    /// Stops the watch cache (the resource is no longer served).
    pub(crate) fn stop(&self) {
        self.cache.stop();
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.def.group_resource(), name)
    }

    /// Maps a store error for the object `name` of this resource.
    fn error_for(&self, name: &str, e: StoreError) -> ApiError {
        let gr = self.def.group_resource();
        match e {
            StoreError::NotFound => ApiError::not_found(&gr, name),
            StoreError::AlreadyExists { .. } => ApiError::already_exists(&gr, name),
            StoreError::Conflict { .. } => ApiError::modified(&gr, name),
            other => store_error(other),
        }
    }
}

/// Maps a store error to the API's, without object details: the one place this happens.
pub(crate) fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Compacted { requested, compacted } => {
            ApiError::too_old_resource_version(requested.get(), compacted.get())
        }
        StoreError::FutureRevision { requested, current } => {
            ApiError::too_large_resource_version(requested.get(), current.get())
        }
        StoreError::InvalidArgument(m) => ApiError::bad_request(m),
        StoreError::ValueTooLarge { size, limit } => ApiError::new(
            Reason::RequestEntityTooLarge,
            format!("Request entity too large: the stored object of {size} bytes exceeds the limit of {limit} bytes"),
        ),
        StoreError::Unavailable(m) => ApiError::unavailable(m),
        other => ApiError::internal(other.to_string()),
    }
}
