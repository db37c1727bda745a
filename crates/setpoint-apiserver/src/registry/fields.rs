//! Field selectors' view of objects, shared by every kind: `metadata.name` and
//! `metadata.namespace`, and a kind's own fields declared as `(label, JSON pointer, value when
//! absent)`, as kube-apiserver's per-kind field-label conversions and `GetAttrs` functions
//! define them. kube-apiserver builds a field set from the typed object, so an absent field has
//! its type's zero value: a bool formats as `false` (`spec.unschedulable` of a schedulable
//! node), an integer as `0`, a string as empty.

use std::collections::BTreeMap;

use serde_json::Value;
use setpoint_core::SelectableFields;

/// A kind's own selectable field: `(field label, JSON pointer into the object, value when
/// absent)`.
pub(crate) type Field = (&'static str, &'static str, &'static str);

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// `metadata.name` and `metadata.namespace` of `object`.
pub(crate) fn metadata_fields(object: &Value) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    fields.insert(
        "metadata.name".to_owned(),
        text(&object["metadata"]["name"]),
    );
    fields.insert(
        "metadata.namespace".to_owned(),
        text(&object["metadata"]["namespace"]),
    );
    fields
}

/// The metadata field labels a kind accepts.
pub(crate) fn metadata_labels(namespaced: bool) -> Vec<String> {
    let mut labels = vec!["metadata.name".to_owned()];
    if namespaced {
        labels.push("metadata.namespace".to_owned());
    }
    labels
}

/// The field labels a kind with its own `fields` accepts.
pub(crate) fn selectable(fields: &[Field], namespaced: bool) -> SelectableFields {
    let mut labels = metadata_labels(namespaced);
    labels.extend(fields.iter().map(|(label, _, _)| (*label).to_owned()));
    SelectableFields::for_kind(labels)
}

/// The values of the metadata fields and of `fields` in `object`.
pub(crate) fn field_set(fields: &[Field], object: &Value) -> BTreeMap<String, String> {
    let mut out = metadata_fields(object);
    for (label, pointer, absent) in fields {
        let value = match object.pointer(pointer) {
            None | Some(Value::Null) => (*absent).to_owned(),
            Some(v) => text(v),
        };
        out.insert((*label).to_owned(), value);
    }
    out
}
