//! Conversion between a resource's served version and its storage version when it takes a
//! call (a CRD with `conversion.strategy: Webhook`, see `crd/conversion/`).
//!
//! Such a resource's strategy has a [`Conversion`]; its `served_from_storage` then leaves the
//! stored object as it is, so its watch cache keeps objects as stored (labels and field
//! selectors are evaluated on them), and every read converts what it answers with:
//! - a get, and the current object an update changes ([`RegistryStore::served`]);
//! - a list page and watch events ([`served_objects`]: one conversion for all of them);
//! - a write converts the object to the storage version before storing it
//!   ([`RegistryStore::stored`]) and answers with the stored object converted back.
//!
//! A conversion that fails fails the request (a 500 naming the webhook); objects already in
//! the wanted version are not sent.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use setpoint_core::{ApiError, Revision};

use super::RegistryStore;
use crate::registry::ResourceDef;
use crate::watchcache::CachedObject;

/// Converts objects between one served version and the storage version.
#[async_trait]
pub(crate) trait Conversion: Send + Sync {
    /// `objects` (as stored, in any version) in the served version, in the same order.
    async fn to_served(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError>;
    /// `objects` (in the served version) in the storage version, in the same order.
    async fn to_storage(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError>;
}

fn only(mut objects: Vec<Value>) -> Result<Value, ApiError> {
    match (objects.pop(), objects.is_empty()) {
        (Some(o), true) => Ok(o),
        _ => Err(ApiError::internal(
            "conversion returned a different number of objects",
        )),
    }
}

impl RegistryStore {
    /// The object as served, from a stored object.
    pub(crate) async fn served(&self, stored: Value) -> Result<Value, ApiError> {
        served_of(&self.def, stored).await
    }

    /// The object as stored, from a served one.
    pub(crate) async fn stored(&self, object: Value) -> Result<Value, ApiError> {
        let strategy = &self.def.strategy;
        let object = match strategy.conversion() {
            None => object,
            Some(c) => only(c.to_storage(vec![object]).await?)?,
        };
        Ok(strategy.to_storage(object))
    }
}

/// The bytes a stored object ([`RegistryStore::stored`]) is written as: without
/// `metadata.resourceVersion` (the store's revision says it), in the wire's field order, so
/// that the watch cache can serve the very bytes the store holds with the version spliced in
/// (`watchcache/object.rs`).
pub(crate) fn storage_bytes(stored: &mut Value) -> bytes::Bytes {
    if let Some(meta) = stored.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let mut bytes = setpoint_core::wire::to_vec(stored);
    // The store keeps these bytes as long as the object lives: no spare capacity with them.
    bytes.shrink_to_fit();
    bytes::Bytes::from(bytes)
}

/// The object as served, from a stored object.
async fn served_of(def: &ResourceDef, stored: Value) -> Result<Value, ApiError> {
    let object = def.strategy.served_from_storage(stored);
    match def.strategy.conversion() {
        None => Ok(object),
        Some(c) => only(c.to_served(vec![object]).await?),
    }
}

/// Objects of the watch cache of `def` as served: unchanged unless the resource has a
/// [`Conversion`], else converted together (one webhook call for a page or a batch of
/// events) and cached anew, each keeping its key and resource version.
pub(crate) async fn served_objects(
    def: &ResourceDef,
    objects: Vec<Arc<CachedObject>>,
) -> Result<Vec<Arc<CachedObject>>, ApiError> {
    let Some(conversion) = def.strategy.conversion() else {
        return Ok(objects);
    };
    if objects.is_empty() {
        return Ok(objects);
    }
    let values = objects
        .iter()
        .map(|o| serde_json::from_slice::<Value>(&o.json.bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::internal(format!("cached object does not decode: {e}")))?;
    let converted = conversion.to_served(values).await?;
    if converted.len() != objects.len() {
        return Err(ApiError::internal(
            "conversion returned a different number of objects",
        ));
    }
    Ok(objects
        .iter()
        .zip(converted)
        .map(|(cached, mut value)| {
            let revision = value["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|r| r.parse::<Revision>().ok())
                .unwrap_or(Revision::ZERO);
            Arc::new(CachedObject::from_value(
                def,
                cached.key.clone(),
                &mut value,
                revision,
            ))
        })
        .collect())
}
