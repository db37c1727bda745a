//! Where elements end up in a merged list (upstream's "preserve order in strategic merge patch"
//! rules, `normalizeElementOrder` and friends).
//!
//! A merged list is split into the elements the patch (or its `$setElementOrder` list) names and
//! the elements only the server had. Each part is sorted by its reference order: the patch
//! elements by the patch (or `$setElementOrder`) order, the server-only elements by their order
//! in the live list. The parts are then interleaved: a server-only element goes before a patch
//! element only when both are in the live list and it came first there. So an element new to
//! the list lands right after the patch element before it, or first if there is none, unless a
//! `$setElementOrder` list places it.

use serde_json::Value;

use super::elements::{check_merge_keys, split_deletions, ElementKind, DIRECTIVE};
use crate::patch::error::PatchResult;

/// Splits `merged` into the elements that `by` names and the others, keeping their order
/// (upstream `partitionMapsByPresentInList` / `partitionPrimitivesByPresentInList`).
pub(super) fn partition(
    merged: Vec<Value>,
    by: &[Value],
    key: Option<&str>,
) -> PatchResult<(Vec<Value>, Vec<Value>)> {
    let mut named = Vec::with_capacity(merged.len());
    let mut others = Vec::new();
    for v in merged {
        let found = match key {
            None => by.contains(&v),
            Some(key) => {
                let wanted = super::elements::merge_key_value(&v, key)?;
                by.iter().any(|b| b.get(key) == Some(wanted))
            }
        };
        if found {
            named.push(v);
        } else {
            others.push(v);
        }
    }
    Ok((named, others))
}

/// Orders the two parts of a merged list and interleaves them (upstream
/// `normalizeElementOrder`): `patch_items` by `patch_order`, `server_only` by `server_order`.
pub(super) fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
    kind: ElementKind,
) -> PatchResult<Vec<Value>> {
    let patch_items = sort_by_reference(patch_items, patch_order, key, kind)?;
    let server_only = sort_by_reference(server_only, server_order, key, kind)?;
    Ok(interleave(
        server_only,
        patch_items,
        server_order,
        key,
        kind,
    ))
}

/// Sorts `items` by their position in `order`, deletion directives last (upstream
/// `normalizeSliceOrder`). Items `order` does not name keep their places.
fn sort_by_reference(
    items: Vec<Value>,
    order: &[Value],
    key: Option<&str>,
    kind: ElementKind,
) -> PatchResult<Vec<Value>> {
    let (mut items, deletions) = if kind == ElementKind::Object {
        // Upstream checks the merge key even when the field has none (it then looks for "").
        check_merge_keys(key.unwrap_or(""), &[&items, order])?;
        split_deletions(items)?
    } else {
        (items, Vec::new())
    };
    // Upstream's comparator treats unnamed items as "less" than anything, which is no order at
    // all; they cannot occur once the patch has been validated. Sort only the named ones.
    let slots: Vec<(usize, usize)> = items
        .iter()
        .enumerate()
        .filter_map(|(slot, v)| position(order, v, key, kind).map(|at| (slot, at)))
        .collect();
    let mut named: Vec<(usize, Value)> = slots
        .iter()
        .map(|&(slot, at)| (at, std::mem::take(&mut items[slot])))
        .collect();
    named.sort_by_key(|&(at, _)| at);
    for (&(slot, _), (_, v)) in slots.iter().zip(named) {
        items[slot] = v;
    }
    items.extend(deletions);
    Ok(items)
}

/// Merges the sorted `server_only` and `patch_items` lists (upstream `mergeSortedSlice`).
fn interleave(
    server_only: Vec<Value>,
    patch_items: Vec<Value>,
    server_order: &[Value],
    key: Option<&str>,
    kind: ElementKind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(server_only.len() + patch_items.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => matches!(
                (position(server_order, l, key, kind), position(server_order, r, key, kind)),
                (Some(li), Some(ri)) if li < ri
            ),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// The live list of objects as upstream's `$setElementOrder` handling sees it after merging
/// `patch` into it by `key` (the reference order for its final interleave).
///
/// Upstream deletes elements with `append(original[:i], original[i+1:]...)` and adds new ones
/// with `append`, both in the array the live list shares; the live list keeps its length. So it
/// ends up as: the surviving elements, then new elements in the slots deletions freed, then
/// stale copies of the last elements. This only changes results when a patch both deletes and
/// adds elements, e.g. live `[1, 2, 4]`, patch deleting 1 and adding 3, order `[2, 3]` gives
/// `[2, 4, 3]` upstream (its own test case), not `[2, 3, 4]`.
pub(super) fn live_order_after_merge(live: &[Value], patch: &[Value], key: &str) -> Vec<Value> {
    let mut shared = live.to_vec();
    let mut current = live.to_vec();
    let mut replaced = false;
    for element in patch {
        match element.get(DIRECTIVE).and_then(Value::as_str) {
            Some("delete") => {
                let Some(doomed) = element.get(key) else {
                    continue;
                };
                while let Some(at) = current.iter().position(|v| v.get(key) == Some(doomed)) {
                    for slot in at..current.len() - 1 {
                        shared[slot] = shared[slot + 1].clone();
                    }
                    current.remove(at);
                }
            }
            Some("replace") => replaced = true,
            _ => {}
        }
    }
    if replaced {
        // The patch elements become a new list: nothing more is written to the shared one.
        return shared;
    }
    for element in patch.iter().filter(|e| e.get(DIRECTIVE).is_none()) {
        let wanted = element.get(key);
        if current.iter().any(|v| v.get(key) == wanted) {
            continue;
        }
        if let Some(slot) = shared.get_mut(current.len()) {
            *slot = element.clone();
        }
        current.push(element.clone());
    }
    shared
}

/// Where `item` is in `list`: by merge key value for objects, by value for scalars (upstream
/// `index`). An object without the key matches the first element without it, as upstream.
fn position(list: &[Value], item: &Value, key: Option<&str>, kind: ElementKind) -> Option<usize> {
    match (kind, key) {
        (ElementKind::Object, Some(key)) => {
            let wanted = item.get(key);
            list.iter().position(|v| v.get(key) == wanted)
        }
        (ElementKind::Object, None) => list.iter().position(|v| v.get("") == item.get("")),
        (ElementKind::Scalar, _) => list.iter().position(|v| v == item),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(items: &[Value]) -> Vec<&str> {
        items.iter().map(|v| v["name"].as_str().unwrap()).collect()
    }

    fn objs(names: &[&str]) -> Vec<Value> {
        names.iter().map(|n| json!({ "name": n })).collect()
    }

    #[test]
    fn new_patch_elements_should_follow_the_patch_element_before_them() {
        let server_order = objs(&["a", "b", "c"]);
        let merged = objs(&["a", "b", "c", "d"]);
        let patch = objs(&["b", "d"]);
        let (named, others) = partition(merged, &patch, Some("name")).unwrap();
        let out = normalize_element_order(
            named,
            others,
            &patch,
            &server_order,
            Some("name"),
            ElementKind::Object,
        )
        .unwrap();
        assert_eq!(names(&out), ["a", "b", "d", "c"]);
    }

    #[test]
    fn new_elements_without_a_patch_element_before_them_should_go_first() {
        let server_order = objs(&["a", "b"]);
        let patch = objs(&["z"]);
        let (named, others) = partition(objs(&["a", "b", "z"]), &patch, Some("name")).unwrap();
        let out = normalize_element_order(
            named,
            others,
            &patch,
            &server_order,
            Some("name"),
            ElementKind::Object,
        )
        .unwrap();
        assert_eq!(names(&out), ["z", "a", "b"]);
    }

    #[test]
    fn a_set_element_order_list_should_reorder_server_elements() {
        let server_order = objs(&["a", "b", "c"]);
        let order = objs(&["c", "a", "b"]);
        let (named, others) = partition(objs(&["a", "b", "c"]), &order, Some("name")).unwrap();
        let out = normalize_element_order(
            named,
            others,
            &order,
            &server_order,
            Some("name"),
            ElementKind::Object,
        )
        .unwrap();
        assert_eq!(names(&out), ["c", "a", "b"]);
    }

    #[test]
    fn scalars_should_be_ordered_by_value() {
        let server_order = [json!("a"), json!("b"), json!("c")];
        let patch = [json!("c"), json!("x")];
        let merged = vec![json!("a"), json!("b"), json!("c"), json!("x")];
        let (named, others) = partition(merged, &patch, None).unwrap();
        let out = normalize_element_order(
            named,
            others,
            &patch,
            &server_order,
            None,
            ElementKind::Scalar,
        )
        .unwrap();
        assert_eq!(out, [json!("a"), json!("b"), json!("c"), json!("x")]);
    }

    #[test]
    fn deletion_directives_should_sort_last() {
        let items = vec![
            json!({"name": "d", "$patch": "delete"}),
            json!({"name": "a"}),
        ];
        let out =
            sort_by_reference(items, &objs(&["a"]), Some("name"), ElementKind::Object).unwrap();
        assert_eq!(names(&out), ["a", "d"]);
    }
}
