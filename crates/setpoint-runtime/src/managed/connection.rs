//! Publishing connection details: the Secret a managed object's `writeConnectionSecretToRef`
//! names (namespace defaulting to the object's), of type `connection.crossplane.io/v1alpha1`,
//! controlled by the object (so the garbage collector removes it with the object). It is made
//! with the first details; keys are merged into it, and it is written only when a key is
//! missing or different. A Secret another object controls is not touched (an error).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::managed::object::api_error;
use crate::managed::{ConnectionDetails, Managed, ManagedError};
use crate::Client;

/// The type of connection Secrets (Crossplane's).
pub const CONNECTION_SECRET_TYPE: &str = "connection.crossplane.io/v1alpha1";

/// Merges `details` into `object`'s connection Secret, if it names one.
pub(super) async fn publish<M: Managed>(
    client: &Client,
    object: &M,
    details: &ConnectionDetails,
    manager: &str,
) -> Result<(), ManagedError> {
    let Some(reference) = object
        .resource_spec()
        .and_then(|s| s.write_connection_secret_to_ref.as_ref())
    else {
        return Ok(());
    };
    let Some(namespace) = reference
        .namespace
        .as_deref()
        .or(object.meta().namespace.as_deref())
        .filter(|ns| !ns.is_empty())
    else {
        return Err(invalid(
            "writeConnectionSecretToRef.namespace is required for a cluster-scoped object",
        ));
    };
    let Some(owner) = object.controller_owner_ref(&()) else {
        return Err(invalid(
            "the object has no uid to own its connection Secret",
        ));
    };
    let secrets = client.namespaced_api::<Secret>(namespace);
    let what = "publishing connection details";
    let name = reference.name.as_str();
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    let Some(current) = secrets
        .get_opt(name)
        .await
        .map_err(|e| api_error(what, e))?
    else {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            type_: Some(CONNECTION_SECRET_TYPE.to_owned()),
            data: Some(bytes(details)),
            ..Secret::default()
        };
        let post = PostParams {
            field_manager: params.field_manager.clone(),
            ..PostParams::default()
        };
        secrets
            .create(&post, &secret)
            .await
            .map_err(|e| api_error(what, e))?;
        return Ok(());
    };
    let references = current
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    if let Some(other) = references
        .iter()
        .find(|r| r.controller == Some(true) && r.uid != owner.uid)
    {
        return Err(invalid(format!(
            "Secret {namespace}/{name} is controlled by {} {}, not by this object",
            other.kind, other.name
        )));
    }
    let data = current.data.clone().unwrap_or_default();
    let changed: BTreeMap<String, ByteString> = bytes(details)
        .into_iter()
        .filter(|(key, value)| data.get(key) != Some(value))
        .collect();
    let owned = references.iter().any(|r| r.uid == owner.uid);
    if changed.is_empty() && owned {
        return Ok(());
    }
    let mut patch = json!({ "data": changed });
    if !owned {
        let mut references = references;
        references.push(owner);
        patch["metadata"] = json!({
            "ownerReferences": references,
            "resourceVersion": current.metadata.resource_version,
        });
    }
    secrets
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| api_error(what, e))?;
    Ok(())
}

/// Details as Secret data.
fn bytes(details: &ConnectionDetails) -> BTreeMap<String, ByteString> {
    details
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.clone())))
        .collect()
}

/// A connection Secret that cannot be written as asked.
fn invalid(message: impl Into<String>) -> ManagedError {
    ManagedError::External {
        what: "publish connection details",
        source: message.into().into(),
    }
}
