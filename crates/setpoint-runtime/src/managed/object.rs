//! The managed object as the loop writes it: merge patches of its metadata, spec and status
//! through a dynamic API (the kind's scope is not known to the loop, which serves namespaced
//! and cluster-scoped kinds alike), each answer read back as the typed object.
//!
//! A write computed from an object that may be stale (the finalizer, the default external name,
//! the create-pending mark, late initialisation) carries that object's `resourceVersion`, so
//! the server refuses it (`409`) if the object changed in between; the reconcile then fails and
//! is retried with the fresh object.

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use crate::managed::{Managed, ManagedError};
use crate::Client;

/// Writes to one managed object.
pub(super) struct ObjectApi {
    api: kube::Api<DynamicObject>,
    name: String,
    params: PatchParams,
}

impl ObjectApi {
    /// The API for `object`, writing as field manager `manager`.
    pub(super) fn new<M: Managed>(client: &Client, object: &M, manager: &str) -> ObjectApi {
        let resource = ApiResource::erase::<M>(&());
        let namespace = object
            .meta()
            .namespace
            .as_deref()
            .filter(|ns| !ns.is_empty());
        ObjectApi {
            api: client.dynamic_api(&resource, namespace),
            name: object.meta().name.clone().unwrap_or_default(),
            params: PatchParams {
                field_manager: Some(manager.to_owned()),
                ..PatchParams::default()
            },
        }
    }

    /// Merge-patches the object with `patch`; with `guard`, only if it is still at that
    /// `resourceVersion`. Returns the object written.
    pub(super) async fn patch<M: Managed>(
        &self,
        what: &str,
        mut patch: Value,
        guard: Option<&str>,
    ) -> Result<M, ManagedError> {
        if let (Some(rv), Some(fields)) = (guard, patch.as_object_mut()) {
            let metadata = fields.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = metadata.as_object_mut() {
                metadata.insert("resourceVersion".to_owned(), json!(rv));
            }
        }
        let written = self
            .api
            .patch(&self.name, &self.params, &Patch::Merge(&patch))
            .await
            .map_err(|source| api_error(what, source))?;
        typed(what, written)
    }

    /// The object as the server has it now (not as a cache may still have it).
    pub(super) async fn get<M: Managed>(&self) -> Result<M, ManagedError> {
        let what = "reading the object";
        let read = self
            .api
            .get(&self.name)
            .await
            .map_err(|source| api_error(what, source))?;
        typed(what, read)
    }

    /// Merge-patches the object's `status` subresource with `{"status": status}`. Returns the
    /// object written.
    pub(super) async fn patch_status<M: Managed>(&self, status: Value) -> Result<M, ManagedError> {
        let what = "writing the status";
        let written = self
            .api
            .patch_status(
                &self.name,
                &self.params,
                &Patch::Merge(&json!({ "status": status })),
            )
            .await
            .map_err(|source| api_error(what, source))?;
        typed(what, written)
    }
}

/// A dynamic object as the typed object.
fn typed<M: Managed>(what: &str, object: DynamicObject) -> Result<M, ManagedError> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| api_error(what, kube::Error::SerdeError(e)))
}

/// An API error while doing `what`.
pub(super) fn api_error(what: &str, source: kube::Error) -> ManagedError {
    ManagedError::Api {
        what: what.to_owned(),
        source,
    }
}

/// `object` as JSON (`Null` if it does not serialize, which a kube type always does).
pub(super) fn to_json<M: Managed>(object: &M) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// Whether `error` is the server refusing a write to a stale object.
pub(super) fn is_conflict(error: &ManagedError) -> bool {
    matches!(
        error,
        ManagedError::Api { source: kube::Error::Api(status), .. } if status.code == 409
    )
}
