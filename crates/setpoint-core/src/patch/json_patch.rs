//! JSON patch (RFC 6902, `application/json-patch+json`), with the semantics of the library
//! kube-apiserver applies it with (`gopkg.in/evanphx/json-patch.v4`), including where that
//! library departs from the RFC:
//!
//! * `replace` of a missing object member adds it (the RFC says fail);
//! * `copy` from a missing object member copies `null`;
//! * a negative array index counts from the end (`-1` is the last element; for `add`, `-1`
//!   appends);
//! * anything before the first `/` of a pointer is ignored, and `add`/`remove`/`move`/`copy` on
//!   the whole document (`""`) fail; `replace` of the whole document with a non-container is a
//!   no-op;
//! * an object member whose value is `null` counts as absent when a pointer passes through it,
//!   and a `test` of an absent member against `null` succeeds;
//! * `copy` operations may add at most [`MAX_JSON_PATCH_COPY_BYTES`] in total.
//!
//! Operations apply in order to a working copy; the first failure aborts the whole patch.

use serde_json::{Map, Value};

use super::error::{OperationFailure, PatchError, PatchResult};
use super::pointer::{parse_index, resolve_existing, resolve_insert, Pointer};

/// The most operations kube-apiserver accepts in one JSON patch (`maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The most bytes `copy` operations may add to a document, all operations of one patch
/// together (kube-apiserver's default `JSONPatchMaxCopyBytes`).
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// A decoded JSON patch: a list of operations, not yet checked against any document.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonPatch {
    /// The operations, in the order they apply.
    ops: Vec<Operation>,
    /// `[index].field` for each operation member other than `op`, `path`, `from`, `value`.
    unknown_fields: Vec<String>,
}

/// One operation as sent. Fields are optional because upstream only checks them when the
/// operation runs: a missing `op` fails as an unknown operation, not as a decoding error.
#[derive(Clone, Debug, Default, PartialEq)]
struct Operation {
    op: Option<String>,
    path: Option<String>,
    from: Option<String>,
    /// `None` when the member is absent; `Some(Value::Null)` when it is `null`.
    value: Option<Value>,
}

/// Applies the JSON patch `patch` to `doc`. Shorthand for [`JsonPatch::from_value`] then
/// [`JsonPatch::apply`].
///
/// ```
/// use serde_json::json;
/// let doc = json!({"metadata": {"finalizers": ["a"]}});
/// let patch = json!([
///     {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
///     {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
/// ]);
/// let out = setpoint_core::json_patch(doc, patch).unwrap();
/// assert_eq!(out, json!({"metadata": {"finalizers": ["a", "b"]}}));
/// ```
pub fn json_patch(doc: Value, patch: Value) -> PatchResult<Value> {
    JsonPatch::from_value(patch)?.apply(doc)
}

impl JsonPatch {
    /// Decodes a patch body. `null` is an empty patch. Fails with [`PatchError::Malformed`]
    /// unless the body is an array of objects (or `null`s) whose `op`, `path` and `from` are
    /// strings, and with [`PatchError::TooManyOperations`] past
    /// [`MAX_JSON_PATCH_OPERATIONS`].
    pub fn from_value(patch: Value) -> PatchResult<JsonPatch> {
        let items = match patch {
            Value::Null => Vec::new(),
            Value::Array(items) => items,
            other => {
                return Err(PatchError::Malformed(format!(
                    "cannot unmarshal {} into a list of JSON patch operations",
                    json_type(&other)
                )))
            }
        };
        let mut decoded = JsonPatch::default();
        for (index, item) in items.into_iter().enumerate() {
            let fields = match item {
                Value::Null => Map::new(),
                Value::Object(fields) => fields,
                other => {
                    return Err(PatchError::Malformed(format!(
                        "cannot unmarshal {} into JSON patch operation {index}",
                        json_type(&other)
                    )))
                }
            };
            let mut op = Operation::default();
            for (name, value) in fields {
                match name.as_str() {
                    "op" => op.op = string_field(index, "op", value)?,
                    "path" => op.path = string_field(index, "path", value)?,
                    "from" => op.from = string_field(index, "from", value)?,
                    "value" => op.value = Some(value),
                    _ => decoded.unknown_fields.push(format!("[{index}].{name}")),
                }
            }
            decoded.ops.push(op);
        }
        if decoded.ops.len() > MAX_JSON_PATCH_OPERATIONS {
            return Err(PatchError::TooManyOperations {
                count: decoded.ops.len(),
                max: MAX_JSON_PATCH_OPERATIONS,
            });
        }
        Ok(decoded)
    }

    /// Number of operations.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the patch has no operation (it then leaves any document unchanged).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Operation members that are not part of RFC 6902, as `[index].name`. kube-apiserver
    /// ignores them when applying; with `fieldValidation=Strict` it then rejects the request
    /// (422), with `Warn` (the default) it answers with a warning per field.
    #[must_use]
    pub fn unknown_fields(&self) -> &[String] {
        &self.unknown_fields
    }

    /// Applies the operations in order to `doc` and returns the result, or the first failure
    /// as [`PatchError::OperationFailed`].
    pub fn apply(self, mut doc: Value) -> PatchResult<Value> {
        let mut copied = 0;
        for (index, op) in self.ops.into_iter().enumerate() {
            let name = op.op.clone().unwrap_or_else(|| "unknown".to_owned());
            let path = op.path.clone().unwrap_or_default();
            apply_operation(&mut doc, op, &mut copied).map_err(|failure| {
                PatchError::OperationFailed {
                    index,
                    op: name,
                    path,
                    failure,
                }
            })?;
        }
        Ok(doc)
    }
}

fn string_field(index: usize, field: &str, value: Value) -> PatchResult<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        other => Err(PatchError::Malformed(format!(
            "cannot unmarshal {} into field {field:?} of JSON patch operation {index}, which \
             must be a string",
            json_type(&other)
        ))),
    }
}

/// The JSON type of `v`, for messages.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

type OpResult<T> = Result<T, OperationFailure>;

fn apply_operation(doc: &mut Value, op: Operation, copied: &mut usize) -> OpResult<()> {
    let path = op.path.ok_or(OperationFailure::MissingField("path"));
    match op.op.as_deref() {
        Some("add") => {
            let path = path?;
            let (parent, last) = locate(doc, &path)?;
            add(parent, &last, op.value.unwrap_or(Value::Null), &path)
        }
        Some("remove") => {
            let path = path?;
            let (parent, last) = locate(doc, &path)?;
            take(parent, &last, &path).map(drop)
        }
        Some("replace") => {
            let path = path?;
            let value = op.value.unwrap_or(Value::Null);
            if path.is_empty() {
                // Upstream swaps in an object or array and silently ignores anything else.
                if value.is_object() || value.is_array() {
                    *doc = value;
                }
                return Ok(());
            }
            let (parent, last) = locate(doc, &path)?;
            replace(parent, &last, value, &path)
        }
        Some("move") => {
            let from = op.from.ok_or(OperationFailure::MissingField("from"))?;
            let (parent, last) = locate(doc, &from)?;
            let value = take(parent, &last, &from)?;
            let path = path?;
            let (parent, last) = locate(doc, &path)?;
            add(parent, &last, value, &path)
        }
        Some("copy") => {
            let from = op.from.ok_or(OperationFailure::MissingField("from"))?;
            let (parent, last) = locate(doc, &from)?;
            let value = get(parent, &last, &from)?.cloned();
            let path = path?;
            let (parent, last) = locate(doc, &path)?;
            // Upstream copies a missing object member as null, and counts it as 0 bytes.
            let size = value
                .as_ref()
                .map_or(0, |v| serde_json::to_vec(v).map_or(0, |b| b.len()));
            *copied += size;
            if *copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(OperationFailure::CopyLimitExceeded {
                    size: *copied,
                    limit: MAX_JSON_PATCH_COPY_BYTES,
                });
            }
            add(parent, &last, value.unwrap_or(Value::Null), &path)
        }
        Some("test") => {
            let path = path?;
            let failed = || OperationFailure::TestFailed {
                pointer: path.clone(),
            };
            if path.is_empty() {
                return match op.value {
                    Some(v) if v == *doc => Ok(()),
                    _ => Err(failed()),
                };
            }
            let (parent, last) = locate(doc, &path)?;
            match (get(parent, &last, &path)?, op.value) {
                // An absent member, or one holding null, passes a test against null.
                (None, Some(Value::Null)) => Ok(()),
                (Some(actual), Some(expected)) if *actual == expected => Ok(()),
                _ => Err(failed()),
            }
        }
        other => Err(OperationFailure::UnknownOp(
            other.unwrap_or("unknown").to_owned(),
        )),
    }
}

/// Finds the container holding the location `pointer` names, and the location's last token.
fn locate<'d>(doc: &'d mut Value, pointer: &str) -> OpResult<(&'d mut Value, String)> {
    let missing = || OperationFailure::MissingPath {
        pointer: pointer.to_owned(),
    };
    let parsed = Pointer::parse(pointer).ok_or_else(missing)?;
    let mut current = doc;
    for token in &parsed.parents {
        current = match current {
            Value::Object(members) => members.get_mut(token),
            Value::Array(items) => {
                let len = items.len();
                parse_index(token)
                    .and_then(|i| resolve_existing(i, len))
                    .and_then(|i| items.get_mut(i))
            }
            _ => None,
        }
        .ok_or_else(missing)?;
    }
    if current.is_object() || current.is_array() {
        Ok((current, parsed.last))
    } else {
        Err(missing())
    }
}

fn array_index(token: &str, pointer: &str) -> OpResult<i64> {
    parse_index(token).ok_or_else(|| OperationFailure::NotAnIndex {
        pointer: pointer.to_owned(),
        token: token.to_owned(),
    })
}

fn out_of_range(index: i64, len: usize, pointer: &str) -> OperationFailure {
    OperationFailure::IndexOutOfRange {
        pointer: pointer.to_owned(),
        index,
        len,
    }
}

/// Reads a location. `Ok(None)` for an absent object member or one holding `null`.
fn get<'c>(container: &'c Value, last: &str, pointer: &str) -> OpResult<Option<&'c Value>> {
    match container {
        Value::Array(items) => {
            let index = array_index(last, pointer)?;
            let at = resolve_existing(index, items.len())
                .ok_or_else(|| out_of_range(index, items.len(), pointer))?;
            Ok(items.get(at))
        }
        Value::Object(members) => Ok(members.get(last).filter(|v| !v.is_null())),
        _ => Err(OperationFailure::MissingPath {
            pointer: pointer.to_owned(),
        }),
    }
}

fn add(container: &mut Value, last: &str, value: Value, pointer: &str) -> OpResult<()> {
    match container {
        Value::Object(members) => {
            members.insert(last.to_owned(), value);
            Ok(())
        }
        Value::Array(items) if last == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => {
            let index = array_index(last, pointer)?;
            let at = resolve_insert(index, items.len())
                .ok_or_else(|| out_of_range(index, items.len(), pointer))?;
            items.insert(at, value);
            Ok(())
        }
        _ => Err(OperationFailure::MissingPath {
            pointer: pointer.to_owned(),
        }),
    }
}

/// Removes a location and returns what it held.
fn take(container: &mut Value, last: &str, pointer: &str) -> OpResult<Value> {
    match container {
        Value::Object(members) => {
            members
                .remove(last)
                .ok_or_else(|| OperationFailure::MissingKey {
                    pointer: pointer.to_owned(),
                    key: last.to_owned(),
                })
        }
        Value::Array(items) => {
            let index = array_index(last, pointer)?;
            let at = resolve_existing(index, items.len())
                .ok_or_else(|| out_of_range(index, items.len(), pointer))?;
            Ok(items.remove(at))
        }
        _ => Err(OperationFailure::MissingPath {
            pointer: pointer.to_owned(),
        }),
    }
}

fn replace(container: &mut Value, last: &str, value: Value, pointer: &str) -> OpResult<()> {
    match container {
        // Upstream does not check that the member exists: replace acts as add.
        Value::Object(members) => {
            members.insert(last.to_owned(), value);
            Ok(())
        }
        Value::Array(items) => {
            let index = array_index(last, pointer)?;
            let at = resolve_existing(index, items.len())
                .ok_or_else(|| out_of_range(index, items.len(), pointer))?;
            items[at] = value;
            Ok(())
        }
        _ => Err(OperationFailure::MissingPath {
            pointer: pointer.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(doc: Value, patch: Value) -> PatchResult<Value> {
        json_patch(doc, patch)
    }

    fn failure(doc: Value, patch: Value) -> (usize, OperationFailure) {
        match apply(doc, patch) {
            Err(PatchError::OperationFailed { index, failure, .. }) => (index, failure),
            other => panic!("expected an operation failure, got {other:?}"),
        }
    }

    fn pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "labels": {"app": "web"}, "finalizers": ["a", "b"]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        })
    }

    #[test]
    fn add_should_create_members_overwrite_them_and_insert_into_arrays() {
        let out = apply(
            pod(),
            json!([
                {"op": "add", "path": "/metadata/labels/tier", "value": "fe"},
                {"op": "add", "path": "/metadata/labels/app", "value": "api"},
                {"op": "add", "path": "/metadata/finalizers/0", "value": "z"},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "end"},
                {"op": "add", "path": "/metadata/finalizers/4", "value": "last"},
            ]),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["labels"],
            json!({"app": "api", "tier": "fe"})
        );
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["z", "a", "b", "end", "last"])
        );
    }

    #[test]
    fn add_past_the_end_of_an_array_should_fail() {
        let (index, f) = failure(
            pod(),
            json!([{"op": "add", "path": "/metadata/finalizers/3", "value": "x"}]),
        );
        assert_eq!(index, 0);
        assert_eq!(
            f,
            OperationFailure::IndexOutOfRange {
                pointer: "/metadata/finalizers/3".into(),
                index: 3,
                len: 2
            }
        );
    }

    #[test]
    fn add_with_a_negative_index_should_count_from_the_end_of_the_grown_array() {
        let out = apply(
            json!({"l": [1, 2]}),
            json!([
                {"op": "add", "path": "/l/-1", "value": 3},
                {"op": "add", "path": "/l/-4", "value": 0},
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"l": [0, 1, 2, 3]}));
    }

    #[test]
    fn add_under_a_missing_parent_should_fail_with_missing_path() {
        let (_, f) = failure(
            pod(),
            json!([{"op": "add", "path": "/metadata/annotations/a", "value": "1"}]),
        );
        assert_eq!(
            f,
            OperationFailure::MissingPath {
                pointer: "/metadata/annotations/a".into()
            }
        );
    }

    #[test]
    fn add_through_a_scalar_or_null_should_fail_with_missing_path() {
        let doc = json!({"a": "s", "n": null});
        for path in ["/a/b", "/n/b"] {
            let (_, f) = failure(
                doc.clone(),
                json!([{"op": "add", "path": path, "value": 1}]),
            );
            assert_eq!(
                f,
                OperationFailure::MissingPath {
                    pointer: path.into()
                }
            );
        }
    }

    #[test]
    fn add_to_the_whole_document_should_fail() {
        let (_, f) = failure(pod(), json!([{"op": "add", "path": "", "value": {}}]));
        assert_eq!(f, OperationFailure::MissingPath { pointer: "".into() });
    }

    #[test]
    fn add_without_a_value_should_add_null() {
        let out = apply(json!({}), json!([{"op": "add", "path": "/x"}])).unwrap();
        assert_eq!(out, json!({"x": null}));
    }

    #[test]
    fn escaped_pointer_tokens_should_name_keys_with_slashes_and_tildes() {
        let out = apply(
            json!({"metadata": {"annotations": {}}}),
            json!([
                {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "me"},
                {"op": "add", "path": "/metadata/annotations/a~0b", "value": "t"},
            ]),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"example.com/owner": "me", "a~b": "t"})
        );
    }

    #[test]
    fn remove_should_delete_members_and_array_elements() {
        let out = apply(
            pod(),
            json!([
                {"op": "remove", "path": "/metadata/labels/app"},
                {"op": "remove", "path": "/metadata/finalizers/0"},
                {"op": "remove", "path": "/spec/containers/-1"},
            ]),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({}));
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(out["spec"]["containers"], json!([]));
    }

    #[test]
    fn remove_of_a_missing_member_should_fail_and_leave_nothing_changed() {
        let (index, f) = failure(
            pod(),
            json!([
                {"op": "add", "path": "/metadata/labels/x", "value": "1"},
                {"op": "remove", "path": "/metadata/labels/nope"},
            ]),
        );
        assert_eq!(index, 1);
        assert_eq!(
            f,
            OperationFailure::MissingKey {
                pointer: "/metadata/labels/nope".into(),
                key: "nope".into()
            }
        );
    }

    #[test]
    fn remove_with_a_non_numeric_array_token_should_fail() {
        let (_, f) = failure(
            pod(),
            json!([{"op": "remove", "path": "/metadata/finalizers/-"}]),
        );
        assert_eq!(
            f,
            OperationFailure::NotAnIndex {
                pointer: "/metadata/finalizers/-".into(),
                token: "-".into()
            }
        );
    }

    #[test]
    fn replace_should_change_existing_values() {
        let out = apply(
            pod(),
            json!([
                {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.27"},
                {"op": "replace", "path": "/metadata/finalizers/1", "value": "c"},
            ]),
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "nginx:1.27");
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
    }

    #[test]
    fn replace_of_a_missing_member_should_add_it_like_kube_apiserver() {
        // evanphx/json-patch v4 does not check that the member exists; RFC 6902 would fail.
        let out = apply(
            pod(),
            json!([{"op": "replace", "path": "/metadata/labels/new", "value": "x"}]),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"]["new"], "x");
    }

    #[test]
    fn replace_of_a_missing_array_element_should_fail() {
        let (_, f) = failure(
            pod(),
            json!([{"op": "replace", "path": "/metadata/finalizers/2", "value": "x"}]),
        );
        assert!(matches!(
            f,
            OperationFailure::IndexOutOfRange { index: 2, .. }
        ));
    }

    #[test]
    fn replace_of_the_whole_document_should_take_objects_and_ignore_scalars() {
        let out = apply(
            pod(),
            json!([{"op": "replace", "path": "", "value": {"a": 1}}]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": 1}));
        let out = apply(pod(), json!([{"op": "replace", "path": "", "value": 5}])).unwrap();
        assert_eq!(out, pod());
    }

    #[test]
    fn move_should_remove_the_source_and_add_at_the_target() {
        let out = apply(
            json!({"a": {"x": 1}, "l": [1, 2, 3]}),
            json!([
                {"op": "move", "from": "/a/x", "path": "/b"},
                {"op": "move", "from": "/l/0", "path": "/l/-"},
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {}, "b": 1, "l": [2, 3, 1]}));
    }

    #[test]
    fn move_into_its_own_child_should_fail() {
        let (_, f) = failure(
            json!({"a": {"b": {}}}),
            json!([{"op": "move", "from": "/a", "path": "/a/b/c"}]),
        );
        assert_eq!(
            f,
            OperationFailure::MissingPath {
                pointer: "/a/b/c".into()
            }
        );
    }

    #[test]
    fn move_without_from_should_fail_naming_the_field() {
        let (_, f) = failure(json!({"a": 1}), json!([{"op": "move", "path": "/b"}]));
        assert_eq!(f, OperationFailure::MissingField("from"));
    }

    #[test]
    fn copy_should_duplicate_values_and_copy_missing_members_as_null() {
        let out = apply(
            json!({"a": {"x": [1]}}),
            json!([
                {"op": "copy", "from": "/a", "path": "/b"},
                {"op": "copy", "from": "/nothing", "path": "/c"},
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"x": [1]}, "b": {"x": [1]}, "c": null}));
    }

    #[test]
    fn copy_should_stop_past_the_accumulated_size_limit() {
        let big = "x".repeat(1024 * 1024);
        let ops: Vec<Value> = (0..4)
            .map(|i| json!({"op": "copy", "from": "/s", "path": format!("/c{i}")}))
            .collect();
        let (index, f) = failure(json!({ "s": big }), Value::Array(ops));
        assert_eq!(index, 2);
        assert!(matches!(f, OperationFailure::CopyLimitExceeded { .. }));
    }

    #[test]
    fn test_should_pass_on_equal_values_and_fail_otherwise() {
        let ok = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": ["a", "b"]},
            {"op": "test", "path": "/spec/containers/0", "value": {"image": "nginx", "name": "c"}},
            {"op": "test", "path": "/metadata/missing", "value": null},
        ]);
        assert_eq!(apply(pod(), ok).unwrap(), pod());
        let (index, f) = failure(
            pod(),
            json!([
                {"op": "test", "path": "/metadata/name", "value": "p1"},
                {"op": "test", "path": "/metadata/finalizers", "value": ["b", "a"]},
            ]),
        );
        assert_eq!(index, 1);
        assert_eq!(
            f,
            OperationFailure::TestFailed {
                pointer: "/metadata/finalizers".into()
            }
        );
    }

    #[test]
    fn test_should_distinguish_integers_from_floats_and_missing_values() {
        let doc = json!({"n": 1, "o": {}});
        assert!(apply(
            doc.clone(),
            json!([{"op": "test", "path": "/n", "value": 1.0}])
        )
        .is_err());
        assert!(apply(
            doc.clone(),
            json!([{"op": "test", "path": "/x", "value": 1}])
        )
        .is_err());
        assert!(apply(doc.clone(), json!([{"op": "test", "path": "/n"}])).is_err());
        assert!(apply(
            doc,
            json!([{"op": "test", "path": "", "value": {"n": 1, "o": {}}}])
        )
        .is_ok());
    }

    #[test]
    fn finalizer_removal_guarded_by_test_should_work_like_kube_rs_sends_it() {
        // kube-runtime's finalizer helper: test the list, then remove one entry by index.
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": ["a", "b"]},
            {"op": "remove", "path": "/metadata/finalizers/1"},
        ]);
        let out = apply(pod(), patch.clone()).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a"]));
        // The same patch against a list someone else changed must fail (422), not remove "a".
        let (index, f) = failure(out, patch);
        assert_eq!(index, 0);
        assert!(matches!(f, OperationFailure::TestFailed { .. }));
    }

    #[test]
    fn unknown_or_missing_op_should_fail_at_its_index() {
        let (index, f) = failure(
            pod(),
            json!([{"op": "test", "path": "/kind", "value": "Pod"}, {"op": "merge", "path": "/a"}]),
        );
        assert_eq!(index, 1);
        assert_eq!(f, OperationFailure::UnknownOp("merge".into()));
        let (_, f) = failure(pod(), json!([null]));
        assert_eq!(f, OperationFailure::UnknownOp("unknown".into()));
        let (_, f) = failure(pod(), json!([{"op": "remove"}]));
        assert_eq!(f, OperationFailure::MissingField("path"));
    }

    #[test]
    fn malformed_bodies_should_be_rejected_before_applying() {
        for body in [
            json!({}),
            json!("x"),
            json!([1]),
            json!([{"op": 1, "path": "/a"}]),
        ] {
            let err = apply(pod(), body.clone()).unwrap_err();
            assert!(matches!(err, PatchError::Malformed(_)), "{body}: {err:?}");
        }
        assert_eq!(apply(pod(), Value::Null).unwrap(), pod());
    }

    #[test]
    fn unknown_operation_members_should_be_reported_but_ignored() {
        let patch = JsonPatch::from_value(json!([
            {"op": "add", "path": "/a", "value": 1, "comment": "why"}
        ]))
        .unwrap();
        assert_eq!(patch.unknown_fields(), ["[0].comment"]);
        assert_eq!(patch.apply(json!({})).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn more_than_ten_thousand_operations_should_be_too_large() {
        let ops = vec![json!({"op": "test", "path": "/kind", "value": "Pod"}); 10_001];
        assert_eq!(
            apply(pod(), Value::Array(ops)).unwrap_err(),
            PatchError::TooManyOperations {
                count: 10_001,
                max: 10_000
            }
        );
    }
}
