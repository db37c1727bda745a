//! JSON in the field order kube-apiserver writes it.
//!
//! Go's encoder writes a struct's fields in declaration order, so every object kube-apiserver
//! sends starts `kind, apiVersion, metadata` and a `Status` reads `kind, apiVersion, metadata,
//! status, message, reason, details, code`. A `serde_json::Value` object is a `BTreeMap` (the
//! workspace does not turn on serde_json's `preserve_order`: an `IndexMap` per object would cost
//! every decode and lookup in the server), so serializing one directly comes out alphabetical.
//! [`to_vec`] reorders at encode time instead, and only where the order is visible and fixed:
//!
//! - an object: `kind, apiVersion, metadata, spec`, then its other fields (alphabetically),
//!   then `status`; each element of a top-level `items` array likewise (lists);
//! - `metadata`: `ObjectMeta`'s and `ListMeta`'s order (`name, generateName, namespace, …`);
//! - a `Status` (kind `Status`): `kind, apiVersion, metadata, status, message, reason, details,
//!   code`, its `details` as `name, group, kind, uid, causes, retryAfterSeconds` and each cause
//!   as `reason, message, field`.
//!
//! Deeper values keep serde_json's order: the cost stays one pass over the value, like a plain
//! `serde_json::to_vec`. The trailing newline kube-apiserver's encoder adds to a response body
//! is the response writer's business, not this module's (an encoded object is also spliced
//! into lists and watch events).

use serde_json::{Map, Value};

/// Where a JSON object sits, which decides the order of its keys.
#[derive(Clone, Copy)]
enum Place {
    /// A top-level API object (or list item).
    Object,
    /// An object's `metadata` (`ObjectMeta` or `ListMeta`).
    Metadata,
    /// A `Status` object.
    Status,
    /// A `Status`'s `details`.
    Details,
    /// One of `details.causes`.
    Cause,
}

impl Place {
    /// Keys written first, in this order, when present.
    fn first(self) -> &'static [&'static str] {
        match self {
            Place::Object => &["kind", "apiVersion", "metadata", "spec"],
            Place::Metadata => &[
                "name",
                "generateName",
                "namespace",
                "selfLink",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "labels",
                "annotations",
                "ownerReferences",
                "finalizers",
                "managedFields",
                "continue",
                "remainingItemCount",
            ],
            Place::Status => &[
                "kind",
                "apiVersion",
                "metadata",
                "status",
                "message",
                "reason",
                "details",
                "code",
            ],
            Place::Details => &[
                "name",
                "group",
                "kind",
                "uid",
                "causes",
                "retryAfterSeconds",
            ],
            Place::Cause => &["reason", "message", "field"],
        }
    }

    /// Keys written last, after every other key.
    fn last(self) -> &'static [&'static str] {
        match self {
            Place::Object => &["status"],
            _ => &[],
        }
    }

    /// The place of the value under `key` inside an object at this place, if it is ordered.
    fn child(self, key: &str) -> Option<Child> {
        match (self, key) {
            (Place::Object | Place::Status, "metadata") => Some(Child::One(Place::Metadata)),
            (Place::Object, "items") => Some(Child::Each(Place::Object)),
            (Place::Status, "details") => Some(Child::One(Place::Details)),
            (Place::Details, "causes") => Some(Child::Each(Place::Cause)),
            _ => None,
        }
    }
}

/// How a child value is ordered: itself, or each element of an array.
#[derive(Clone, Copy)]
enum Child {
    One(Place),
    Each(Place),
}

/// Serializes `value` with kube-apiserver's field order (see the module docs).
#[must_use]
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(&mut out, value);
    out
}

/// Appends `value`, serialized with kube-apiserver's field order, to `out`.
pub fn write(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Object(map) => write_object(out, map, place_of(map)),
        other => write_plain(out, other),
    }
}

/// A top-level object is a `Status` when its kind says so.
fn place_of(map: &Map<String, Value>) -> Place {
    if map.get("kind").and_then(Value::as_str) == Some("Status") {
        Place::Status
    } else {
        Place::Object
    }
}

/// Whether `key` comes before `resourceVersion` in an object's `metadata` as written here:
/// where a resource version goes into metadata written without one.
#[must_use]
pub fn precedes_resource_version(key: &str) -> bool {
    let first = Place::Metadata.first();
    let rv = first.iter().position(|k| *k == "resourceVersion");
    match (first.iter().position(|k| *k == key), rv) {
        (Some(at), Some(rv)) => at < rv,
        _ => false,
    }
}

fn write_plain(out: &mut Vec<u8>, value: &Value) {
    serde_json::to_writer(&mut *out, value).expect("a JSON value serializes");
}

fn write_at(out: &mut Vec<u8>, value: &Value, place: Place) {
    match value {
        Value::Object(map) => write_object(out, map, place),
        other => write_plain(out, other),
    }
}

fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>, place: Place) {
    let first = place.first();
    let last = place.last();
    let ordered = first
        .iter()
        .filter_map(|k| map.get_key_value(*k))
        .chain(
            map.iter()
                .filter(|(k, _)| !first.contains(&k.as_str()) && !last.contains(&k.as_str())),
        )
        .chain(last.iter().filter_map(|k| map.get_key_value(*k)));
    out.push(b'{');
    for (i, (key, value)) in ordered.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect("a string serializes");
        out.push(b':');
        match (place.child(key), value) {
            (Some(Child::One(p)), v) => write_at(out, v, p),
            (Some(Child::Each(p)), Value::Array(items)) => {
                out.push(b'[');
                for (j, item) in items.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    write_at(out, item, p);
                }
                out.push(b']');
            }
            (_, v) => write_plain(out, v),
        }
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(v: &Value) -> String {
        String::from_utf8(to_vec(v)).unwrap()
    }

    #[test]
    fn object_should_start_with_kind_api_version_metadata_and_end_with_status() {
        let v = json!({"status": {"b": 1, "a": 2}, "spec": {"x": 1}, "metadata": {"uid": "u", "name": "n", "namespace": "d"}, "apiVersion": "v1", "kind": "Pod", "data": 1});
        assert_eq!(
            text(&v),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","namespace":"d","uid":"u"},"spec":{"x":1},"data":1,"status":{"a":2,"b":1}}"#
        );
        // The same value, whatever the order: the output parses back to it.
        assert_eq!(serde_json::from_slice::<Value>(&to_vec(&v)).unwrap(), v);
    }

    #[test]
    fn status_should_follow_kube_apiservers_field_order() {
        let v = json!({"code": 422, "details": {"causes": [{"field": "f", "message": "m", "reason": "FieldValueInvalid"}], "kind": "Pod", "name": "p", "group": ""}, "reason": "Invalid", "message": "bad", "status": "Failure", "metadata": {}, "apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            text(&v),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"bad","reason":"Invalid","details":{"name":"p","group":"","kind":"Pod","causes":[{"reason":"FieldValueInvalid","message":"m","field":"f"}]},"code":422}"#
        );
    }

    #[test]
    fn list_items_should_be_ordered_like_objects() {
        let v = json!({"items": [{"metadata": {}, "kind": "A", "apiVersion": "v1"}], "metadata": {"resourceVersion": "5", "continue": "c"}, "apiVersion": "v1", "kind": "AList"});
        assert_eq!(
            text(&v),
            r#"{"kind":"AList","apiVersion":"v1","metadata":{"resourceVersion":"5","continue":"c"},"items":[{"kind":"A","apiVersion":"v1","metadata":{}}]}"#
        );
    }

    #[test]
    fn only_the_keys_before_resource_version_should_precede_it() {
        for key in ["name", "generateName", "namespace", "selfLink", "uid"] {
            assert!(precedes_resource_version(key), "{key}");
        }
        for key in [
            "resourceVersion",
            "generation",
            "labels",
            "managedFields",
            "zzz",
        ] {
            assert!(!precedes_resource_version(key), "{key}");
        }
    }

    #[test]
    fn non_objects_should_serialize_as_serde_json_does() {
        assert_eq!(text(&json!([1, "a"])), r#"[1,"a"]"#);
        assert_eq!(text(&json!("x\"y")), r#""x\"y""#);
    }
}
