//! Walks over objects guided by a [`Shape`]: the field set of an object, the comparison of two
//! objects, the merge of an applied configuration into an object, and the removal of a set's
//! fields from an object.

use serde_json::{Map, Value};

use super::element::Element;
use super::set::FieldSet;
use super::shape::{key_default, ListType, Shape};

/// The fields two objects differ in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Fields only the new object has (an object or list item added whole is itself added).
    pub added: FieldSet,
    /// Leaves whose value changed.
    pub modified: FieldSet,
    /// Fields only the old object has.
    pub removed: FieldSet,
}

impl Comparison {
    /// Whether the objects are the same.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// The element naming list item `item` at position `index` in a list of type `list`.
fn item_element(list: &ListType, item: &Value, index: usize) -> String {
    match list {
        ListType::Set => Element::value(item),
        ListType::Map(keys) => match item {
            Value::Object(map) if !keys.is_empty() => {
                let defaults: Vec<(String, Value)> = keys
                    .iter()
                    .filter(|k| !map.contains_key(k.as_str()))
                    .filter_map(|k| key_default(k).map(|d| (k.clone(), d)))
                    .collect();
                let mut fields: Vec<(&str, &Value)> = keys
                    .iter()
                    .filter_map(|k| map.get(k).map(|v| (k.as_str(), v)))
                    .collect();
                fields.extend(defaults.iter().map(|(k, v)| (k.as_str(), v)));
                if fields.is_empty() {
                    Element::index(index)
                } else {
                    Element::key(&fields)
                }
            }
            _ => Element::index(index),
        },
        ListType::Atomic => Element::index(index),
    }
}

/// Whether a value here is one field (a scalar, null, or an atomic list or object).
fn is_leaf(value: &Value, shape: &Shape) -> bool {
    match value {
        Value::Object(_) => shape.atomic,
        Value::Array(_) => shape.list == ListType::Atomic,
        _ => true,
    }
}

fn is_empty_container(value: Option<&Value>) -> bool {
    match value {
        None => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

/// The items of a list by element, first occurrence of each, in order.
fn index_items<'a>(list: &ListType, items: &'a [Value]) -> Vec<(String, &'a Value)> {
    let mut seen = std::collections::HashSet::new();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| (item_element(list, item, i), item))
        .filter(|(element, _)| seen.insert(element.clone()))
        .collect()
}

/// The fields an object (an applied configuration) sets: every leaf, every list item, every
/// empty or null object value, and every map entry.
#[must_use]
pub fn field_set(value: &Value, shape: &Shape) -> FieldSet {
    let mut set = FieldSet::new();
    fill(value, shape, &mut set);
    set
}

/// Adds the fields of `value` (not `value` itself) below the root of `set`.
fn fill(value: &Value, shape: &Shape, set: &mut FieldSet) {
    if is_leaf(value, shape) {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let child_shape = shape.field(key);
                let node = set.node_mut(Element::field(key));
                fill(child, child_shape, &mut node.children);
                if is_leaf(child, child_shape)
                    || is_empty_container(Some(child)) && child.is_object()
                    || !shape.is_named(key)
                {
                    node.member = true;
                }
            }
        }
        Value::Array(items) => {
            for (element, item) in index_items(&shape.list, items) {
                let node = set.node_mut(element);
                fill(item, shape.item(), &mut node.children);
                node.member = true;
            }
        }
        _ => {}
    }
}

/// Compares `old` with `new` (either may be absent).
#[must_use]
pub fn compare(old: Option<&Value>, new: Option<&Value>, shape: &Shape) -> Comparison {
    let mut out = Comparison::default();
    let mut path = Vec::new();
    compare_at(old, new, shape, &mut path, &mut out);
    out
}

fn compare_at(
    old: Option<&Value>,
    new: Option<&Value>,
    shape: &Shape,
    path: &mut Vec<String>,
    out: &mut Comparison,
) {
    let leaf = |v: Option<&Value>| v.is_none_or(|v| is_leaf(v, shape));
    let mismatched = matches!((old, new), (Some(a), Some(b))
        if std::mem::discriminant(a) != std::mem::discriminant(b));
    let both_empty = is_empty_container(old) && is_empty_container(new);
    if mismatched || both_empty || (leaf(old) && leaf(new)) {
        match (old, new) {
            (None, None) => {}
            (None, Some(_)) => out.added.insert(path),
            (Some(_), None) => out.removed.insert(path),
            (Some(a), Some(b)) if a != b => out.modified.insert(path),
            _ => {}
        }
        return;
    }
    match (old, new) {
        (Some(Value::Object(_)) | None, Some(Value::Object(_)) | None) => {
            let empty = Map::new();
            let a = old.and_then(Value::as_object).unwrap_or(&empty);
            let b = new.and_then(Value::as_object).unwrap_or(&empty);
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                path.push(Element::field(key));
                compare_at(a.get(key), b.get(key), shape.field(key), path, out);
                path.pop();
            }
        }
        (Some(Value::Array(_)) | None, Some(Value::Array(_)) | None) => {
            let a = old
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let b = new
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let a = index_items(&shape.list, a);
            let b = index_items(&shape.list, b);
            fn find<'v>(items: &[(String, &'v Value)], e: &str) -> Option<&'v Value> {
                items.iter().find(|(x, _)| x == e).map(|(_, v)| *v)
            }
            let mut elements: Vec<&String> = a.iter().map(|(e, _)| e).collect();
            elements.extend(b.iter().map(|(e, _)| e).filter(|e| find(&a, e).is_none()));
            for element in elements {
                path.push(element.clone());
                compare_at(
                    find(&a, element),
                    find(&b, element),
                    shape.item(),
                    path,
                    out,
                );
                path.pop();
            }
        }
        _ => {}
    }
    if old.is_none() {
        out.added.insert(path);
    } else if new.is_none() {
        out.removed.insert(path);
    }
}

/// Merges an applied configuration into `live`: objects field by field, granular lists item by
/// item (live items the configuration lacks keep their places; shared and new items follow
/// the configuration's order), anything else replaced by the configuration's value.
#[must_use]
pub fn merge(live: Option<&Value>, config: &Value, shape: &Shape) -> Value {
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(c)) if !shape.atomic => {
            let mut out = l.clone();
            for (key, value) in c {
                let merged = merge(l.get(key), value, shape.field(key));
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(c)) if shape.list != ListType::Atomic => {
            Value::Array(merge_items(l, c, shape))
        }
        (_, config) => config.clone(),
    }
}

/// Merges granular list items: one pass over both lists, live items the configuration lacks
/// emitted where they stand, shared items merged in the configuration's order.
fn merge_items(live: &[Value], config: &[Value], shape: &Shape) -> Vec<Value> {
    let l = index_items(&shape.list, live);
    let c = index_items(&shape.list, config);
    let in_live = |e: &str| l.iter().find(|(x, _)| x == e).map(|(_, v)| *v);
    let in_config = |e: &str| c.iter().any(|(x, _)| x == e);
    let mut shared = c.iter().map(|(e, _)| e).filter(|e| in_live(e).is_some());
    let mut next_shared = shared.next();
    let mut emitted = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(l.len().max(c.len()));
    let (mut li, mut ci) = (0, 0);
    while li < l.len() || ci < c.len() {
        if li < l.len() && ci < c.len() {
            let (le, lv) = &l[li];
            let (ce, cv) = &c[ci];
            if le == ce {
                emitted.insert(ce.clone());
                out.push(merge(Some(lv), cv, shape.item()));
                li += 1;
                ci += 1;
                next_shared = shared.next();
                continue;
            }
            // A shared live item out of the configuration's order waits for its turn there.
            if in_config(le) && next_shared.is_some_and(|n| n != le) {
                li += 1;
                continue;
            }
        }
        if li < l.len() {
            let (le, lv) = &l[li];
            if !in_config(le) {
                out.push((*lv).clone());
                li += 1;
                continue;
            } else if emitted.contains(le) {
                li += 1;
            }
        }
        if ci < c.len() {
            let (ce, cv) = &c[ci];
            emitted.insert(ce.clone());
            out.push(merge(in_live(ce), cv, shape.item()));
            ci += 1;
            if next_shared == Some(ce) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// `value` without the fields of `set`: a field in the set goes with everything below it.
pub fn remove(value: &mut Value, set: &FieldSet, shape: &Shape) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let Some(node) = set.node(&Element::field(&key)) else {
                    continue;
                };
                if node.member {
                    map.remove(&key);
                } else if let Some(child) = map.get_mut(&key) {
                    remove(child, &node.children, shape.field(&key));
                }
            }
        }
        Value::Array(items) if shape.list != ListType::Atomic => {
            let elements: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(i, item)| item_element(&shape.list, item, i))
                .collect();
            let mut kept = Vec::with_capacity(items.len());
            for (item, element) in std::mem::take(items).into_iter().zip(elements) {
                match set.node(&element) {
                    Some(node) if node.member => {}
                    Some(node) => {
                        let mut item = item;
                        remove(&mut item, &node.children, shape.item());
                        kept.push(item);
                    }
                    None => kept.push(item),
                }
            }
            *items = kept;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
