//! Helpers for kinds' defaults: set a field that is absent, reach a nested object.

use serde_json::{Map, Value};

/// Sets `map[key]` to `value` if absent or null.
pub(crate) fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

/// The object at `path` under `v`, if every step is an object.
pub(crate) fn object_at<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for p in path {
        cur = cur.as_object_mut()?.get_mut(*p)?;
    }
    cur.as_object_mut()
}

/// Sets `object.status` (a new object's initial status).
pub(crate) fn set_status(object: &mut Value, status: Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert("status".into(), status);
    }
}
