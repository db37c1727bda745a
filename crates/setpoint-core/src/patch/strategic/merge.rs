//! The strategic merge of a patch object into a live object (upstream `mergeMap` with the
//! server-side options `MergeParallelList` and `IgnoreUnmatchedNulls`), directives included.

use serde_json::{Map, Value};

use super::elements::{
    as_object, element_kind, go_type, has_directive, json_text, merge_key_value, same_element,
    split_deletions, ElementKind, DIRECTIVE, LIST,
};
use super::order::{live_order_after_merge, normalize_element_order, partition};
use super::schema::{FieldStrategy, SchemaNode};
use crate::patch::error::{PatchError, PatchResult};

type Object = Map<String, Value>;

const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Merges `patch` into `original`, an object whose fields `node` describes (`None`: nothing
/// known, every field gets the default treatment).
pub(super) fn merge_object(
    mut original: Object,
    mut patch: Object,
    node: Option<&SchemaNode>,
) -> PatchResult<Object> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Object::new()),
            _ => Err(PatchError::UnknownDirective {
                directive: json_text(directive),
                object: json_text(&Value::Object(patch.clone())),
            }),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_element_orders(&mut original, &mut patch, node)?;

    for (key, value) in patch {
        let (field, delete_list) = match directive_field(
            &key,
            DELETE_FROM_PRIMITIVE_LIST,
            PatchError::BadDeleteFromPrimitiveList,
        ) {
            Some(field) => (field?.to_owned(), true),
            None => (key, false),
        };
        if value.is_null() {
            original.remove(&field);
            continue;
        }
        let child = node.and_then(|n| n.child(&field));
        let Some(slot) = original.get_mut(&field) else {
            // A deletion list never creates the list it deletes from.
            if !delete_list {
                set_new_value(&mut original, field, value);
            }
            continue;
        };
        let current = std::mem::take(slot);
        match merge_field(current, value, child, delete_list, &field)? {
            Merged::Value(v) => *slot = v,
            Merged::New(v) => set_new_value(&mut original, field, v),
        }
    }
    Ok(original)
}

/// For a key `<prefix>/<field>`, the field; `None` if `key` does not start with `prefix`;
/// `bad` if it does but is not of that form.
fn directive_field<'k>(
    key: &'k str,
    prefix: &str,
    bad: PatchError,
) -> Option<PatchResult<&'k str>> {
    if !key.starts_with(prefix) {
        return None;
    }
    Some(match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field),
        _ => Err(bad),
    })
}

/// What merging a patch value into a live field gave.
enum Merged {
    /// The field's new value.
    Value(Value),
    /// The patch value replaces the field wholesale, after the cleanup
    /// [`set_new_value`] applies.
    New(Value),
}

/// Merges a patch value into a field present in the live object.
fn merge_field(
    current: Value,
    patch: Value,
    node: Option<&SchemaNode>,
    delete_list: bool,
    field: &str,
) -> PatchResult<Merged> {
    let strategy = node.and_then(|n| n.strategy);
    Ok(Merged::Value(match (current, patch) {
        (Value::Object(_), Value::Object(patch)) if strategy == Some(FieldStrategy::Replace) => {
            Value::Object(patch)
        }
        (Value::Object(current), Value::Object(patch)) => {
            Value::Object(merge_object(current, patch, node)?)
        }
        (Value::Array(current), Value::Array(patch)) => {
            Value::Array(merge_list_field(current, patch, node, delete_list, field)?)
        }
        // Scalars of one Go type: the patch value wins.
        (current, patch) if go_type(&current) == go_type(&patch) => patch,
        // A change of type replaces the value, except from a deletion list.
        (current, _) if delete_list => current,
        (_, patch) => return Ok(Merged::New(patch)),
    }))
}

/// Stores a patch value for a field the live object lacks (or holds with another JSON type),
/// as upstream does: `null` members are dropped throughout, and objects carrying a `$patch`
/// directive are dropped with the member or element holding them (upstream
/// `discardNullValuesFromPatch` then `removeDirectives`). If `value` itself carries `$patch`,
/// the field is removed.
fn set_new_value(object: &mut Object, field: String, mut value: Value) {
    discard_nulls(&mut value);
    if keep_without_directives(&mut value) {
        object.insert(field, value);
    } else {
        object.remove(&field);
    }
}

/// Removes `null` members from every object in `value` (not `null` list elements).
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(members) => {
            members.retain(|_, v| !v.is_null());
            members.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Removes from `value` every object with a `$patch` member, with the member or element holding
/// it. Returns whether `value` itself is to be kept.
fn keep_without_directives(value: &mut Value) -> bool {
    match value {
        Value::Object(members) => {
            if members.contains_key(DIRECTIVE) {
                return false;
            }
            members.retain(|_, v| keep_without_directives(v));
            true
        }
        Value::Array(items) => {
            items.retain_mut(keep_without_directives);
            true
        }
        _ => true,
    }
}

/// Merges a patch list into a live list: element-wise if the field's strategy says so or the
/// patch list is a `$deleteFromPrimitiveList`, otherwise the patch list replaces the live one
/// as sent (upstream `mergeSliceHandler`).
fn merge_list_field(
    current: Vec<Value>,
    patch: Vec<Value>,
    node: Option<&SchemaNode>,
    delete_list: bool,
    field: &str,
) -> PatchResult<Vec<Value>> {
    let strategy = node.and_then(|n| n.strategy);
    if strategy.is_some_and(FieldStrategy::merges_lists) || delete_list {
        let key = strategy.and_then(FieldStrategy::merge_key);
        merge_list(current, patch, key, node, delete_list, field)
    } else {
        Ok(patch)
    }
}

/// Merges two lists of a field with strategy `merge` (upstream `mergeSlice`). `node` describes
/// the elements' fields.
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    key: Option<&str>,
    node: Option<&SchemaNode>,
    delete_list: bool,
    field: &str,
) -> PatchResult<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&[&original, &patch])?;
    let (server_order, patch, merged) = match kind {
        ElementKind::Scalar if delete_list => {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        ElementKind::Scalar => {
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for v in original.iter().chain(&patch) {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
            }
            (original, patch, merged)
        }
        ElementKind::Object => {
            let key = key.ok_or_else(|| PatchError::NoMergeKey {
                field: field.to_owned(),
            })?;
            let (original, patch) = apply_element_directives(original, patch, key)?;
            let merged = merge_elements(original.clone(), &patch, key, node)?;
            (original, patch, merged)
        }
    };
    let (named, others) = partition(merged, &patch, key)?;
    normalize_element_order(named, others, &patch, &server_order, key, kind)
}

/// Applies the `$patch` directives among the elements of a patch list of objects: `delete`
/// removes the live elements with that key, `replace` makes the other patch elements the whole
/// list (upstream `mergeSliceWithSpecialElements`). Returns the live list and the patch
/// elements left to merge.
fn apply_element_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> PatchResult<(Vec<Value>, Vec<Value>)> {
    let mut rest = Vec::with_capacity(patch.len());
    let mut replace = false;
    for element in patch {
        let Some(directive) = element.get(DIRECTIVE) else {
            rest.push(element);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let doomed = merge_key_value(&element, key)?;
                original.retain(|v| v.get(key) != Some(doomed));
            }
            Some("replace") => replace = true,
            Some("merge") => return Err(PatchError::ListMergeDirective),
            _ => {
                return Err(PatchError::UnknownDirective {
                    directive: json_text(directive),
                    object: json_text(&element),
                })
            }
        }
    }
    Ok(if replace {
        (rest, Vec::new())
    } else {
        (original, rest)
    })
}

/// Merges each patch element into the live element with the same key, or appends it
/// (upstream `mergeSliceWithoutSpecialElements`).
fn merge_elements(
    mut merged: Vec<Value>,
    patch: &[Value],
    key: &str,
    node: Option<&SchemaNode>,
) -> PatchResult<Vec<Value>> {
    for element in patch {
        let wanted = merge_key_value(element, key)?;
        let patch_fields = as_object(element)?.clone();
        match merged.iter().position(|v| v.get(key) == Some(wanted)) {
            Some(at) => {
                let current = match std::mem::take(&mut merged[at]) {
                    Value::Object(current) => current,
                    other => return Err(not_a(super::elements::OBJECT, &other)),
                };
                merged[at] = Value::Object(merge_object(current, patch_fields, node)?);
            }
            None => merged.push(element.clone()),
        }
    }
    Ok(merged)
}

fn not_a(expected: &'static str, v: &Value) -> PatchError {
    PatchError::UnexpectedType {
        expected,
        actual: go_type(v),
    }
}

/// Applies a `$retainKeys` directive: drops the live fields it does not list, after checking
/// that the patch sets no field outside it (upstream `applyRetainKeysDirective`).
fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> PatchResult<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadRetainKeys);
    };
    let retained = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    let outside = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !k.starts_with(SET_ELEMENT_ORDER)
            && !retained(k)
    });
    if outside {
        return Err(PatchError::BadRetainKeys);
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// Applies every `$setElementOrder/<field>` directive: merges the field's patch list (if any)
/// into its live list and orders the result as the directive lists (upstream
/// `mergePatchIntoOriginal`). The field is then removed from the patch.
fn apply_element_orders(
    original: &mut Object,
    patch: &mut Object,
    node: Option<&SchemaNode>,
) -> PatchResult<()> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive in directives {
        let order = match patch.remove(&directive) {
            Some(Value::Array(order)) => order,
            other => return Err(not_a(LIST, &other.unwrap_or_default())),
        };
        let field = directive_field(
            &directive,
            SET_ELEMENT_ORDER,
            PatchError::BadSetElementOrder,
        )
        .unwrap_or(Err(PatchError::BadSetElementOrder))?
        .to_owned();
        let live = list_at(original, &field)?;
        let patched = list_at(patch, &field)?;
        let child = node.and_then(|n| n.child(&field));
        let key = child
            .and_then(|n| n.strategy)
            .and_then(FieldStrategy::merge_key);
        check_patch_follows_order(patched.as_deref().unwrap_or_default(), &order, key)?;

        let patch_list = patched.clone().unwrap_or_default();
        let server_order = match (&live, key) {
            (Some(live), Some(key))
                if patched.is_some()
                    && element_kind(&[live, &patch_list]) == Ok(ElementKind::Object) =>
            {
                live_order_after_merge(live, &patch_list, key)
            }
            _ => live.clone().unwrap_or_default(),
        };
        let merged = match (live, patched) {
            (Some(live), None) => live,
            // A new list is stored without its directive elements.
            (None, Some(mut patched)) => {
                patched.retain_mut(keep_without_directives);
                patched
            }
            (Some(live), Some(patched)) => merge_list_field(live, patched, child, false, &field)?,
            (None, None) => continue,
        };
        let (named, others) = partition(merged, &order, key)?;
        let kind = element_kind(&[&server_order, &patch_list])?;
        let ordered = normalize_element_order(named, others, &order, &server_order, key, kind)?;
        original.insert(field.clone(), Value::Array(ordered));
        patch.remove(&field);
    }
    Ok(())
}

/// The list at `field` of `object`: `None` if absent, an error if not a list.
fn list_at(object: &Object, field: &str) -> PatchResult<Option<Vec<Value>>> {
    match object.get(field) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items.clone())),
        Some(other) => Err(not_a(LIST, other)),
    }
}

/// Checks that the patch list's elements (deletions and other directives aside) appear in the
/// `$setElementOrder` list, in the same relative order (upstream
/// `validatePatchWithSetOrderList`).
fn check_patch_follows_order(
    patch: &[Value],
    order: &[Value],
    key: Option<&str>,
) -> PatchResult<()> {
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let kept = match key {
        Some(_) => split_deletions(patch.to_vec())?.0,
        None => patch.to_vec(),
    };
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if has_directive(&kept[p]) {
            p += 1;
            continue;
        }
        if same_element(&kept[p], &order[o], key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() && o >= order.len() {
        return Err(PatchError::OrderMismatch {
            patch: json_text(&Value::Array(patch.to_vec())),
            order: json_text(&Value::Array(order.to_vec())),
        });
    }
    Ok(())
}
