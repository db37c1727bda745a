//! Elements of lists a strategic merge patch merges: their JSON types as upstream's Go code sees
//! them, and the checks upstream makes on them before merging.

use serde_json::{Map, Value};

use crate::patch::error::{PatchError, PatchResult};

/// The key of the directive member `$patch`.
pub(super) const DIRECTIVE: &str = "$patch";

/// Go's name for the type a JSON value decodes to, for messages.
pub(super) fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => LIST,
        Value::Object(_) => OBJECT,
    }
}

/// Go's name for a JSON list.
pub(super) const LIST: &str = "[]interface {}";
/// Go's name for a JSON object.
pub(super) const OBJECT: &str = "map[string]interface {}";

/// Compact JSON text of a value, for messages.
pub(super) fn json_text(v: &Value) -> String {
    v.to_string()
}

/// What the elements of a merged list are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ElementKind {
    /// Objects: merged by a merge key.
    Object,
    /// Scalars of one Go type: merged as a set.
    Scalar,
}

/// The common kind of the elements of `lists`, which must all have the same Go type and not be
/// lists (upstream `sliceElementType`).
pub(super) fn element_kind(lists: &[&[Value]]) -> PatchResult<ElementKind> {
    let mut first: Option<&Value> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        match first {
            None if v.is_array() => return Err(PatchError::ListOfLists),
            None => first = Some(v),
            Some(f) if go_type(f) != go_type(v) => {
                let all: Vec<Value> = lists.iter().map(|l| Value::Array(l.to_vec())).collect();
                return Err(PatchError::MixedListElements {
                    lists: json_text(&Value::Array(all)),
                });
            }
            Some(_) => {}
        }
    }
    match first {
        None => Err(PatchError::NoListElements),
        Some(Value::Object(_)) => Ok(ElementKind::Object),
        Some(_) => Ok(ElementKind::Scalar),
    }
}

/// `v` as an object, or the error upstream gives for a non-object where it needs one.
pub(super) fn as_object(v: &Value) -> PatchResult<&Map<String, Value>> {
    v.as_object().ok_or_else(|| PatchError::UnexpectedType {
        expected: OBJECT,
        actual: go_type(v),
    })
}

/// The value of `key` in the object `v`, or an error if `v` is not an object or lacks it.
pub(super) fn merge_key_value<'v>(v: &'v Value, key: &str) -> PatchResult<&'v Value> {
    as_object(v)?
        .get(key)
        .ok_or_else(|| PatchError::MissingMergeKey {
            element: json_text(v),
            key: key.to_owned(),
        })
}

/// Whether `v` is an object with a `$patch` member.
pub(super) fn has_directive(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.contains_key(DIRECTIVE))
}

/// Whether `v` is an object with `$patch: delete`.
pub(super) fn is_delete_directive(v: &Value) -> bool {
    v.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// Splits `items` (which must all be objects) into those without and those with
/// `$patch: delete`, keeping their order (upstream `extractToDeleteItems`).
pub(super) fn split_deletions(items: Vec<Value>) -> PatchResult<(Vec<Value>, Vec<Value>)> {
    let mut keep = Vec::with_capacity(items.len());
    let mut delete = Vec::new();
    for v in items {
        as_object(&v)?;
        if is_delete_directive(&v) {
            delete.push(v);
        } else {
            keep.push(v);
        }
    }
    Ok((keep, delete))
}

/// Whether `left` and `right` are the same element: equal scalars without a merge key, equal
/// merge key values with one (upstream `mergeKeyValueEqual`).
pub(super) fn same_element(left: &Value, right: &Value, key: Option<&str>) -> PatchResult<bool> {
    match key {
        None => Ok(left == right),
        Some(key) => Ok(merge_key_value(left, key)? == merge_key_value(right, key)?),
    }
}

/// Checks that every element of `lists` is an object holding `key` (upstream
/// `validateMergeKeyInLists`).
pub(super) fn check_merge_keys(key: &str, lists: &[&[Value]]) -> PatchResult<()> {
    lists
        .iter()
        .flat_map(|l| l.iter())
        .try_for_each(|v| merge_key_value(v, key).map(drop))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn element_kind_should_require_one_go_type() {
        let objects = [json!({"a": 1})];
        assert_eq!(element_kind(&[&objects, &[]]), Ok(ElementKind::Object));
        assert_eq!(
            element_kind(&[&[json!("a")], &[json!("b")]]),
            Ok(ElementKind::Scalar)
        );
        assert_eq!(element_kind(&[&[], &[]]), Err(PatchError::NoListElements));
        assert_eq!(element_kind(&[&[json!([1])]]), Err(PatchError::ListOfLists));
        assert!(matches!(
            element_kind(&[&[json!(1)], &[json!(1.5)]]),
            Err(PatchError::MixedListElements { .. })
        ));
        assert!(matches!(
            element_kind(&[&[json!("a"), json!({"a": 1})]]),
            Err(PatchError::MixedListElements { .. })
        ));
    }

    #[test]
    fn merge_key_checks_should_name_the_element_and_key() {
        assert_eq!(
            merge_key_value(&json!({"image": "x"}), "name"),
            Err(PatchError::MissingMergeKey {
                element: r#"{"image":"x"}"#.into(),
                key: "name".into()
            })
        );
        assert_eq!(
            merge_key_value(&json!("x"), "name"),
            Err(PatchError::UnexpectedType {
                expected: OBJECT,
                actual: "string"
            })
        );
        assert_eq!(same_element(&json!(1), &json!(1), None), Ok(true));
        assert_eq!(
            same_element(
                &json!({"port": 80, "a": 1}),
                &json!({"port": 80}),
                Some("port")
            ),
            Ok(true)
        );
    }
}
