//! Cached objects and events: decoded, stamped with their resource version, and serialized
//! once.
//!
//! An object stored in the served form (wire field order, no `resourceVersion`: what the
//! registry store writes) is not copied: the cache keeps the store's own bytes and splices
//! `"resourceVersion":"<revision>"` in where it belongs whenever the object is written out
//! ([`ServedJson`]). Only objects whose served form differs (converted, encrypted, written by
//! an older Setpoint) hold a served copy of their own. With the embedded store, whose index
//! holds every current value, this halves the memory of what is cached.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;
use setpoint_core::Revision;
use setpoint_store::{Event, EventKind};

use super::CachedResource;

mod stored;

pub(crate) use stored::StoredForm;

/// One object as the cache keeps it.
#[derive(Debug)]
pub(crate) struct CachedObject {
    /// Its store key.
    pub(crate) key: Bytes,
    pub(crate) namespace: Option<String>,
    /// The object with `metadata.resourceVersion` set, as JSON.
    pub(crate) json: ServedJson,
    pub(crate) labels: BTreeMap<String, String>,
    /// The kind's selectable fields, by field label.
    pub(crate) fields: Fields,
}

/// An object's selectable fields (`metadata.name`, `spec.nodeName`, …) and their values: a
/// boxed slice, which costs a few dozen bytes where a map costs half a kilobyte per object.
#[derive(Debug, Default)]
pub(crate) struct Fields(Box<[(Box<str>, Box<str>)]>);

impl Fields {
    /// The value of field `label`.
    pub(crate) fn get(&self, label: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(l, _)| &**l == label)
            .map(|(_, v)| &**v)
    }
}

impl From<BTreeMap<String, String>> for Fields {
    fn from(fields: BTreeMap<String, String>) -> Fields {
        Fields(
            fields
                .into_iter()
                .map(|(l, v)| (l.into_boxed_str(), v.into_boxed_str()))
                .collect(),
        )
    }
}

/// An object's served JSON (with its `resourceVersion`).
#[derive(Clone, Debug)]
pub(crate) struct ServedJson(Served);

#[derive(Clone, Debug)]
enum Served {
    /// The served bytes, whole.
    Whole(Bytes),
    /// The stored bytes, which are the served bytes without `"resourceVersion":"<revision>"`;
    /// it goes in at byte `at`, with a comma after it (`comma_before`: before it).
    Spliced {
        stored: Bytes,
        at: u32,
        comma_before: bool,
        revision: Revision,
    },
}

impl ServedJson {
    /// Served bytes held whole.
    pub(crate) fn whole(bytes: Bytes) -> ServedJson {
        ServedJson(Served::Whole(bytes))
    }

    /// The served form of `served`, sharing `stored`'s bytes when `stored` is `served`
    /// without its `resourceVersion` (`revision`).
    fn sharing(stored: &Bytes, mut served: Vec<u8>, revision: Revision) -> ServedJson {
        if let Some((at, comma_before)) = splice_point(stored, &served, revision) {
            if let Ok(at) = u32::try_from(at) {
                return ServedJson(Served::Spliced {
                    stored: stored.clone(),
                    at,
                    comma_before,
                    revision,
                });
            }
        }
        served.shrink_to_fit();
        ServedJson::whole(Bytes::from(served))
    }

    /// The length of the served bytes.
    pub(crate) fn len(&self) -> usize {
        match &self.0 {
            Served::Whole(b) => b.len(),
            Served::Spliced {
                stored, revision, ..
            } => stored.len() + RV_FIELD.len() + 3 + digits(*revision, &mut [0; 20]).len(),
        }
    }

    /// Appends the served bytes to `out`.
    pub(crate) fn write_to(&self, out: &mut impl bytes::BufMut) {
        match &self.0 {
            Served::Whole(b) => out.put_slice(b),
            Served::Spliced {
                stored,
                at,
                comma_before,
                revision,
            } => {
                let (head, tail) = stored.split_at(*at as usize);
                out.put_slice(head);
                if *comma_before {
                    out.put_u8(b',');
                }
                out.put_slice(RV_FIELD.as_bytes());
                out.put_u8(b'"');
                out.put_slice(digits(*revision, &mut [0; 20]));
                out.put_u8(b'"');
                if !*comma_before {
                    out.put_u8(b',');
                }
                out.put_slice(tail);
            }
        }
    }

    /// The served bytes (a copy when they are spliced).
    pub(crate) fn bytes(&self) -> Bytes {
        match &self.0 {
            Served::Whole(b) => b.clone(),
            Served::Spliced { .. } => {
                let mut out = Vec::with_capacity(self.len());
                self.write_to(&mut out);
                Bytes::from(out)
            }
        }
    }

    /// The bytes held: `(a copy of the cache's own, shared with the store)`.
    pub(crate) fn held(&self) -> (usize, usize) {
        match &self.0 {
            Served::Whole(b) => (b.len(), 0),
            Served::Spliced { stored, .. } => (0, stored.len()),
        }
    }

    /// Whether the bytes are the store's (for tests).
    #[cfg(test)]
    fn is_shared(&self) -> bool {
        matches!(self.0, Served::Spliced { .. })
    }
}

/// The resource version's field, up to its value's opening quote.
const RV_FIELD: &str = "\"resourceVersion\":";

/// `revision` in decimal, written into `buf` (no allocation: lists write it once per object).
fn digits(revision: Revision, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = revision.get();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// Where `"resourceVersion":"<revision>"` sits in `served` such that taking it (and the comma
/// on one side) out leaves exactly `stored`: `(offset in stored, comma before it)`.
fn splice_point(stored: &[u8], served: &[u8], revision: Revision) -> Option<(usize, bool)> {
    let field = format!("{RV_FIELD}\"{revision}\"");
    if served.len() != stored.len() + field.len() + 1 {
        return None;
    }
    // The first occurrence is the object's own: `metadata` precedes every other field that
    // could hold such text but `apiVersion` and `kind`, which cannot.
    let start = memchr::memmem::find(served, field.as_bytes())?;
    let end = start + field.len();
    if served.get(end) == Some(&b',')
        && served[..start] == stored[..start]
        && served[end + 1..] == stored[start..]
    {
        return Some((start, false));
    }
    if start > 0
        && served[start - 1] == b','
        && served[..start - 1] == stored[..start - 1]
        && served[end..] == stored[start - 1..]
    {
        return Some((start - 1, true));
    }
    None
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
    #[cfg(test)]
    pub(crate) fn decode(
        def: &dyn CachedResource,
        key: &Bytes,
        value: &Bytes,
        revision: Revision,
    ) -> Result<CachedObject, String> {
        CachedObject::decode_with(def, def.stored_form().as_ref(), key, value, revision)
    }

    /// Decodes the stored object whole, and serializes it.
    fn decode_whole(
        def: &dyn CachedResource,
        key: &Bytes,
        value: &Bytes,
        revision: Revision,
    ) -> Result<CachedObject, String> {
        let stored: Value = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        let mut object = def.served_from_storage(stored);
        let (namespace, labels, fields, served) = Self::parts(def, &mut object, revision);
        Ok(CachedObject {
            key: key.clone(),
            namespace,
            json: ServedJson::sharing(value, served, revision),
            labels,
            fields,
        })
    }

    /// Builds the cached form of `object`, setting its `resourceVersion` to `revision`.
    pub(crate) fn from_value(
        def: &dyn CachedResource,
        key: Bytes,
        object: &mut Value,
        revision: Revision,
    ) -> CachedObject {
        let (namespace, labels, fields, served) = Self::parts(def, object, revision);
        CachedObject {
            key,
            namespace,
            json: ServedJson::whole(Bytes::from(served)),
            labels,
            fields,
        }
    }

    /// Stamps `object` with `revision`; returns its namespace, labels, fields and served
    /// bytes.
    fn parts(
        def: &dyn CachedResource,
        object: &mut Value,
        revision: Revision,
    ) -> (Option<String>, BTreeMap<String, String>, Fields, Vec<u8>) {
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".into(),
                Value::String(revision.to_string()),
            );
        }
        let (namespace, labels, fields) = Self::selectors(def, object);
        (
            namespace,
            labels,
            fields,
            setpoint_core::wire::to_vec(object),
        )
    }

    /// What selectors match `object` on: its namespace, labels and selectable fields.
    fn selectors(
        def: &dyn CachedResource,
        object: &Value,
    ) -> (Option<String>, BTreeMap<String, String>, Fields) {
        let labels = object["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let fields = Fields::from(def.field_set(object));
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
        (namespace, labels, fields)
    }
}

impl CachedEvent {
    /// Decodes a store event of a resource whose [`StoredForm`] is `form`.
    pub(crate) fn decode(
        def: &dyn CachedResource,
        form: Option<&StoredForm>,
        event: &Event,
    ) -> Result<CachedEvent, String> {
        let revision = event.revision();
        let prev = match &event.prev {
            Some(p) => Some(std::sync::Arc::new(CachedObject::decode_with(
                def,
                form,
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
                let object =
                    CachedObject::decode_with(def, form, &event.kv.key, &event.kv.value, revision)?;
                (kind, std::sync::Arc::new(object))
            }
            EventKind::Delete => {
                let last = event
                    .prev
                    .as_ref()
                    .ok_or("a delete event without the deleted value")?;
                let object =
                    CachedObject::decode_with(def, form, &last.key, &last.value, revision)?;
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A resource served as stored, with `metadata.name` as its only field.
    struct Plain;

    impl CachedResource for Plain {
        fn key_prefix(&self) -> &str {
            "/registry/configmaps/"
        }
        fn served_from_storage(&self, stored: Value) -> Value {
            stored
        }
        fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            BTreeMap::from([("metadata.name".to_owned(), name.to_owned())])
        }
        fn describe(&self) -> String {
            "configmaps".into()
        }
        fn stored_form(&self) -> Option<StoredForm> {
            Some(StoredForm::new("v1", Vec::new()))
        }
    }

    /// A resource served as `v2` and stored as `v1` (`stored_form` left `None`).
    struct Converted;

    impl CachedResource for Converted {
        fn key_prefix(&self) -> &str {
            "/registry/things/"
        }
        fn served_from_storage(&self, mut stored: Value) -> Value {
            stored["apiVersion"] = "v2".into();
            stored
        }
        fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
            Plain.field_set(object)
        }
        fn describe(&self) -> String {
            "things".into()
        }
    }

    fn served(object: &CachedObject) -> Value {
        let bytes = object.json.bytes();
        assert_eq!(bytes.len(), object.json.len(), "len() is the bytes' length");
        serde_json::from_slice(&bytes).expect("the served bytes are JSON")
    }

    #[test]
    fn an_object_stored_as_served_should_share_the_stores_bytes() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "default", "uid": "u1",
                "creationTimestamp": "2026-11-29T00:00:00Z"},
            "data": {"resourceVersion": "\"resourceVersion\":\"7\""}});
        let stored = Bytes::from(setpoint_core::wire::to_vec(&object));
        let cached =
            CachedObject::decode(&Plain, &Bytes::from_static(b"k"), &stored, Revision(1234))
                .expect("decodes");
        assert!(cached.json.is_shared(), "the store's bytes are kept");
        let mut expected = object.clone();
        expected["metadata"]["resourceVersion"] = json!("1234");
        assert_eq!(served(&cached), expected);
        // Byte for byte what serializing the served object gives.
        assert_eq!(
            cached.json.bytes(),
            Bytes::from(setpoint_core::wire::to_vec(&expected))
        );
        assert_eq!(cached.fields.get("metadata.name"), Some("a"));
        assert_eq!(cached.fields.get("spec.nodeName"), None);
    }

    #[test]
    fn the_version_should_go_in_with_the_comma_on_either_side() {
        // Last in metadata: the comma goes before it.
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let stored = Bytes::from(setpoint_core::wire::to_vec(&object));
        let cached =
            CachedObject::decode(&Plain, &Bytes::from_static(b"k"), &stored, Revision(9)).unwrap();
        assert!(cached.json.is_shared());
        assert_eq!(served(&cached)["metadata"]["resourceVersion"], "9");
        // A version of many digits.
        let cached = CachedObject::decode(
            &Plain,
            &Bytes::from_static(b"k"),
            &stored,
            Revision(10_000_000_001),
        )
        .unwrap();
        assert_eq!(
            served(&cached)["metadata"]["resourceVersion"],
            "10000000001"
        );
    }

    #[test]
    fn a_stored_decode_should_read_only_what_selectors_need_and_serve_the_same_bytes() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "labels": {"app": "web"},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {}}}]},
            "data": {"big": "x\"y\\z \u{e9}\u{1}", "n": "1"}});
        let stored = Bytes::from(setpoint_core::wire::to_vec(&object));
        let form = StoredForm::new("v1", Vec::new());
        let key = Bytes::from_static(b"k");
        let fast = CachedObject::decode_stored(&Plain, &form, &key, &stored, Revision(42))
            .expect("stored as served");
        let whole = CachedObject::decode_whole(&Plain, &key, &stored, Revision(42)).unwrap();
        assert_eq!(fast.json.bytes(), whole.json.bytes(), "byte for byte");
        assert!(fast.json.is_shared());
        assert_eq!(fast.namespace.as_deref(), Some("ns"));
        assert_eq!(fast.labels, BTreeMap::from([("app".into(), "web".into())]));
        assert_eq!(fast.fields.get("metadata.name"), Some("a"));

        // Metadata of only the keys before the version: it goes last.
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u"}});
        let stored = Bytes::from(setpoint_core::wire::to_vec(&object));
        let fast = CachedObject::decode_stored(&Plain, &form, &key, &stored, Revision(7)).unwrap();
        assert_eq!(
            fast.json.bytes(),
            CachedObject::decode_whole(&Plain, &key, &stored, Revision(7))
                .unwrap()
                .json
                .bytes()
        );
    }

    #[test]
    fn a_stored_decode_should_refuse_what_is_not_stored_as_served() {
        let form = StoredForm::new("v1", Vec::new());
        let key = Bytes::from_static(b"k");
        for stored in [
            // Another apiVersion: a converted object.
            &br#"{"kind":"ConfigMap","apiVersion":"v0","metadata":{"name":"a"}}"#[..],
            // A version already in it.
            br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"3"}}"#,
            // Not compact, not an object, no metadata, empty metadata.
            br#"{"kind":"ConfigMap", "apiVersion":"v1","metadata":{"name":"a"}}"#,
            br#"[1]"#,
            br#"{"kind":"ConfigMap","apiVersion":"v1"}"#,
            br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{}}"#,
            // Encrypted.
            b"k8s:enc:aescbc:v1:key1:\x01\x02",
        ] {
            let stored = Bytes::copy_from_slice(stored);
            assert!(
                CachedObject::decode_stored(&Plain, &form, &key, &stored, Revision(5)).is_none(),
                "{}",
                String::from_utf8_lossy(&stored)
            );
        }
        // A converting resource has no stored form: decoded whole, and converted.
        let stored =
            Bytes::from_static(br#"{"kind":"Thing","apiVersion":"v1","metadata":{"name":"a"}}"#);
        assert_eq!(Converted.stored_form(), None);
        let cached = CachedObject::decode(&Converted, &key, &stored, Revision(5)).unwrap();
        assert_eq!(served(&cached)["apiVersion"], "v2");
    }

    #[test]
    fn an_object_stored_otherwise_should_hold_its_served_bytes() {
        // Stored with an old version and in another field order (as an older Setpoint wrote
        // objects): served correctly, from a copy of its own.
        let stored = Bytes::from_static(
            br#"{"data":{"a":"b"},"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"3","name":"a"}}"#,
        );
        let cached =
            CachedObject::decode(&Plain, &Bytes::from_static(b"k"), &stored, Revision(5)).unwrap();
        assert!(!cached.json.is_shared());
        let v = served(&cached);
        assert_eq!(v["metadata"]["resourceVersion"], "5");
        assert_eq!(v["data"]["a"], "b");
        // Not an object at all: no metadata to put a version in.
        let stored = Bytes::from_static(br#"[1,2]"#);
        let cached =
            CachedObject::decode(&Plain, &Bytes::from_static(b"k"), &stored, Revision(5)).unwrap();
        assert!(!cached.json.is_shared());
    }
}
