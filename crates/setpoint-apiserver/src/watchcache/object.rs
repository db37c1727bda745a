//! Cached objects and events: decoded, stamped with their resource version, and serialized
//! once.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;
use setpoint_core::Revision;
use setpoint_store::{Event, EventKind};

use super::CachedResource;

/// One object as the cache keeps it.
#[derive(Debug)]
pub(crate) struct CachedObject {
    /// Its store key.
    pub(crate) key: Bytes,
    pub(crate) namespace: Option<String>,
    /// The object with `metadata.resourceVersion` set, as JSON.
    pub(crate) json: Bytes,
    pub(crate) labels: BTreeMap<String, String>,
    /// The kind's selectable fields.
    pub(crate) fields: BTreeMap<String, String>,
}

/// What a change did, as a watch event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change.
#[derive(Debug)]
pub(crate) struct CachedEvent {
    pub(crate) kind: EventType,
    /// After an add or modify, the new object; after a delete, the object's last state
    /// stamped with the deletion's revision.
    pub(crate) object: std::sync::Arc<CachedObject>,
    /// The object before the change (`None` after an add).
    pub(crate) prev: Option<std::sync::Arc<CachedObject>>,
    pub(crate) revision: Revision,
}

impl CachedObject {
    /// Decodes a stored object and stamps it with `revision`.
    pub(crate) fn decode(
        def: &dyn CachedResource,
        key: &Bytes,
        value: &[u8],
        revision: Revision,
    ) -> Result<CachedObject, String> {
        let stored: Value = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        let mut object = def.served_from_storage(stored);
        Ok(Self::from_value(def, key.clone(), &mut object, revision))
    }

    /// Builds the cached form of `object`, setting its `resourceVersion` to `revision`.
    pub(crate) fn from_value(
        def: &dyn CachedResource,
        key: Bytes,
        object: &mut Value,
        revision: Revision,
    ) -> CachedObject {
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".into(),
                Value::String(revision.to_string()),
            );
        }
        let labels = object["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let fields = def.field_set(object);
        CachedObject {
            key,
            namespace: object["metadata"]["namespace"].as_str().map(str::to_owned),
            json: Bytes::from(setpoint_core::wire::to_vec(object)),
            labels,
            fields,
        }
    }
}

impl CachedEvent {
    /// Decodes a store event.
    pub(crate) fn decode(def: &dyn CachedResource, event: &Event) -> Result<CachedEvent, String> {
        let revision = event.revision();
        let prev = match &event.prev {
            Some(p) => Some(std::sync::Arc::new(CachedObject::decode(
                def,
                &p.key,
                &p.value,
                p.mod_revision,
            )?)),
            None => None,
        };
        let (kind, object) = match event.kind {
            EventKind::Put => {
                let kind = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                let object = CachedObject::decode(def, &event.kv.key, &event.kv.value, revision)?;
                (kind, std::sync::Arc::new(object))
            }
            EventKind::Delete => {
                let last = event
                    .prev
                    .as_ref()
                    .ok_or("a delete event without the deleted value")?;
                let object = CachedObject::decode(def, &last.key, &last.value, revision)?;
                (EventType::Deleted, std::sync::Arc::new(object))
            }
        };
        Ok(CachedEvent {
            kind,
            object,
            prev,
            revision,
        })
    }
}
