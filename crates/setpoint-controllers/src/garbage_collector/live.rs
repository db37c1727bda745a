//! The collector's reads and writes of live objects. Every decision to delete or change an
//! object is taken on what these read from the server (a quorum read), never on the cache;
//! every write is conditional (a uid precondition on delete, a `resourceVersion` on patch), so
//! an object replaced or changed since it was read is left alone.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use parking_lot::RwLock;
use serde_json::{json, Value};

use super::graph::Identity;
use super::mapper::{Mapper, Served};

/// Why a read or write of a live object failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum LiveError {
    /// Discovery knows no resource for the kind.
    #[error("no resource serves {kind} in {api_version}")]
    UnknownKind { api_version: String, kind: String },
    /// A cluster-scoped object names an owner of a namespaced kind: it can never resolve.
    #[error("cluster-scoped object names {kind} {name}, a namespaced kind, as owner")]
    NamespacedOwnerOfClusterScoped { kind: String, name: String },
    /// The API call failed.
    #[error("API request failed")]
    Api(#[from] kube::Error),
}

/// How a delete is propagated to the deleted object's own dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// Reads and writes live objects.
#[derive(Clone)]
pub(super) struct Live {
    client: kube::Client,
    mapper: Arc<RwLock<Mapper>>,
}

impl Live {
    pub(super) fn new(client: kube::Client, mapper: Arc<RwLock<Mapper>>) -> Live {
        Live { client, mapper }
    }

    /// The API for the object: its resource, in its namespace if its kind is namespaced.
    fn api(&self, id: &Identity) -> Result<Api<DynamicObject>, LiveError> {
        let served: Served = self
            .mapper
            .read()
            .resolve(&id.api_version, &id.kind)
            .cloned()
            .ok_or_else(|| LiveError::UnknownKind {
                api_version: id.api_version.clone(),
                kind: id.kind.clone(),
            })?;
        Ok(match (served.namespaced(), id.namespace.as_deref()) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &served.resource),
            (true, None) => {
                return Err(LiveError::NamespacedOwnerOfClusterScoped {
                    kind: id.kind.clone(),
                    name: id.name.clone(),
                })
            }
            (false, _) => Api::all_with(self.client.clone(), &served.resource),
        })
    }

    /// The object named by `id` if it exists with `id`'s uid; `None` if it does not exist or
    /// another object holds its name.
    pub(super) async fn get(&self, id: &Identity) -> Result<Option<DynamicObject>, LiveError> {
        let api = self.api(id)?;
        match api.get_opt(&id.name).await? {
            Some(o) if o.metadata.uid.as_deref() == Some(id.uid.as_str()) => Ok(Some(o)),
            _ => Ok(None),
        }
    }

    /// Deletes the object if it still has `id`'s uid. Already gone is success.
    pub(super) async fn delete(&self, id: &Identity, policy: Propagation) -> Result<(), LiveError> {
        let api = self.api(id)?;
        let params = DeleteParams {
            propagation_policy: Some(match policy {
                Propagation::Background => kube::api::PropagationPolicy::Background,
                Propagation::Foreground => kube::api::PropagationPolicy::Foreground,
                Propagation::Orphan => kube::api::PropagationPolicy::Orphan,
            }),
            preconditions: Some(Preconditions {
                uid: Some(id.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&id.name, &params).await {
            Ok(_) => Ok(()),
            // Gone, or replaced by another object of that name (uid precondition failed).
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets the owner references of `object` (as read) to `owners`; fails with a 409 if it
    /// changed since.
    pub(super) async fn set_owner_references(
        &self,
        id: &Identity,
        object: &DynamicObject,
        owners: &[OwnerReference],
    ) -> Result<(), LiveError> {
        let owners = if owners.is_empty() {
            Value::Null
        } else {
            json!(owners)
        };
        self.patch_metadata(id, object, json!({ "ownerReferences": owners }))
            .await
    }

    /// Removes `finalizer` from `object` (as read); fails with a 409 if it changed since.
    pub(super) async fn remove_finalizer(
        &self,
        id: &Identity,
        object: &DynamicObject,
        finalizer: &str,
    ) -> Result<(), LiveError> {
        let rest: Vec<&String> = object
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != finalizer)
            .collect();
        let rest = if rest.is_empty() {
            Value::Null
        } else {
            json!(rest)
        };
        self.patch_metadata(id, object, json!({ "finalizers": rest }))
            .await
    }

    /// A merge patch of `metadata` conditional on the object's resource version as read.
    async fn patch_metadata(
        &self,
        id: &Identity,
        object: &DynamicObject,
        mut metadata: Value,
    ) -> Result<(), LiveError> {
        metadata["resourceVersion"] = json!(object.metadata.resource_version);
        let api = self.api(id)?;
        let patch = Patch::Merge(json!({ "metadata": metadata }));
        match api.patch(&id.name, &PatchParams::default(), &patch).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether the object has `finalizer`.
pub(super) fn has_finalizer(object: &DynamicObject, finalizer: &str) -> bool {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == finalizer)
}
