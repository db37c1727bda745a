//! The decode of an object stored as served: the store's bytes kept, only what selectors read
//! decoded (a restarted server loads every object this way).

use bytes::Bytes;
use serde_json::Value;
use setpoint_core::Revision;

use super::{CachedObject, CachedResource, Served, ServedJson};
use crate::watchcache::scan;

/// How a resource's objects are stored when they are stored as served (without their
/// `resourceVersion`): what [`CachedObject::decode_with`] needs to decode only what it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredForm {
    /// The served `apiVersion`, quoted as JSON: an object stored with another is converted.
    pub(crate) api_version: String,
    /// The top-level fields the resource's selectable fields read, besides `metadata` (of
    /// which they read only `name` and `namespace`).
    pub(crate) roots: Vec<String>,
}

impl StoredForm {
    /// The form of a resource served as `api_version` whose field selectors read under
    /// `roots`.
    pub(crate) fn new(api_version: &str, roots: Vec<String>) -> StoredForm {
        StoredForm {
            api_version: Value::String(api_version.to_owned()).to_string(),
            roots,
        }
    }
}

impl CachedObject {
    /// [`CachedObject::decode`], given the resource's [`StoredForm`] (`None`: decode whole):
    /// an object stored as served is not decoded whole, only its `metadata` and the fields
    /// its field selectors read; the rest is kept as the store's bytes.
    pub(crate) fn decode_with(
        def: &dyn CachedResource,
        form: Option<&StoredForm>,
        key: &Bytes,
        value: &Bytes,
        revision: Revision,
    ) -> Result<CachedObject, String> {
        if let Some(fast) =
            form.and_then(|form| Self::decode_stored(def, form, key, value, revision))
        {
            #[cfg(debug_assertions)]
            Self::check_stored_decode(def, &fast, key, value, revision);
            return Ok(fast);
        }
        Self::decode_whole(def, key, value, revision)
    }

    /// The decode of an object stored as served: `None` when it is not (another
    /// `apiVersion`, a `resourceVersion` already in it, not compact JSON).
    pub(super) fn decode_stored(
        def: &dyn CachedResource,
        form: &StoredForm,
        key: &Bytes,
        value: &Bytes,
        revision: Revision,
    ) -> Option<CachedObject> {
        let (top, end) = scan::members(value, 0)?;
        if end != value.len() {
            return None;
        }
        let member = |name: &str| {
            top.iter()
                .find(|m| &value[m.key.clone()] == name.as_bytes())
        };
        if value[member("apiVersion")?.value.clone()] != *form.api_version.as_bytes() {
            return None;
        }
        let meta = member("metadata")?;
        let (meta_members, _) = scan::members(value, meta.value.start)?;
        let key_of = |m: &scan::Member| std::str::from_utf8(&value[m.key.clone()]).ok();
        if meta_members
            .iter()
            .any(|m| key_of(m) == Some("resourceVersion"))
        {
            return None;
        }
        // Where the version goes: before the first key that follows it in metadata, else
        // last (after a comma).
        let (at, comma_before) = match meta_members
            .iter()
            .find(|m| !key_of(m).is_some_and(setpoint_core::wire::precedes_resource_version))
        {
            Some(m) => (m.at, false),
            None if meta_members.is_empty() => return None,
            None => (meta.value.end - 1, true),
        };
        let at = u32::try_from(at).ok()?;
        // Of metadata, what selectors read (its managed fields, often most of it, are not).
        let mut metadata = serde_json::Map::new();
        for m in &meta_members {
            let name = key_of(m)?;
            if matches!(name, "name" | "namespace" | "labels") {
                let decoded = serde_json::from_slice(&value[m.value.clone()]).ok()?;
                metadata.insert(name.to_owned(), decoded);
            }
        }
        let mut partial = serde_json::Map::new();
        partial.insert("metadata".to_owned(), Value::Object(metadata));
        for m in &top {
            let name = key_of(m)?;
            if form.roots.iter().any(|r| r == name) {
                let decoded = serde_json::from_slice(&value[m.value.clone()]).ok()?;
                partial.insert(name.to_owned(), decoded);
            }
        }
        let object = Value::Object(partial);
        let (namespace, labels, fields) = Self::selectors(def, &object);
        Some(CachedObject {
            key: key.clone(),
            namespace,
            json: ServedJson(Served::Spliced {
                stored: value.clone(),
                at,
                comma_before,
                revision,
            }),
            labels,
            fields,
        })
    }

    /// Tests run every fast decode against a whole one: the same object, labels and fields.
    #[cfg(debug_assertions)]
    fn check_stored_decode(
        def: &dyn CachedResource,
        fast: &CachedObject,
        key: &Bytes,
        value: &Bytes,
        revision: Revision,
    ) {
        let whole = Self::decode_whole(def, key, value, revision).expect("a whole decode");
        let parse = |json: &ServedJson| -> Value {
            serde_json::from_slice(&json.bytes()).expect("served JSON")
        };
        assert_eq!(parse(&fast.json), parse(&whole.json), "the served object");
        assert_eq!(fast.namespace, whole.namespace);
        assert_eq!(fast.labels, whole.labels);
        assert_eq!(
            format!("{:?}", fast.fields),
            format!("{:?}", whole.fields),
            "the selectable fields of {}",
            String::from_utf8_lossy(value)
        );
    }
}
