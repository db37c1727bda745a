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
mod tests;
