//! Validation every kind shares, with the field paths and messages of kube-apiserver's
//! validation: object metadata (labels, annotation size, owner references) and finalizers.

use serde_json::{json, Value};
use setpoint_core::Cause;

use super::strategy::{validate_name, NameRule};

/// The metadata problems of a built-in object: labels, annotations, owner references, and
/// finalizers (which built-in kinds name from a fixed set or fully qualified).
pub(crate) fn object_meta(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    metadata(&object["metadata"], &mut causes);
    finalizers(&object["metadata"], true, &mut causes);
    causes
}

pub(crate) fn metadata(meta: &Value, causes: &mut Vec<Cause>) {
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            for problem in label_key_problems(k) {
                causes.push(Cause::invalid("metadata.labels", &json!(k), &problem));
            }
            let value = v.as_str().unwrap_or_default();
            if !is_label_value(value) {
                causes.push(Cause::invalid(
                    "metadata.labels",
                    v,
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                ));
            }
        }
    }
    if let Some(annotations) = meta["annotations"].as_object() {
        let total: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if total > 256 * 1024 {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "metadata.annotations",
                format!(
                    "metadata.annotations: Too long: must have at most {} bytes",
                    256 * 1024
                ),
            ));
        }
    }
    if let Some(refs) = meta["ownerReferences"].as_array() {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            for field in ["apiVersion", "kind", "name", "uid"] {
                if r[field].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!(
                        "metadata.ownerReferences[{i}].{field}"
                    )));
                }
            }
            if r["controller"] == json!(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            causes.push(Cause::invalid(
                "metadata.ownerReferences",
                &meta["ownerReferences"],
                "Only one reference can have Controller set to true",
            ));
        }
    }
}

/// Finalizers that built-in kinds accept without a domain prefix.
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// `metadata.finalizers`: each a qualified name (`example.com/cleanup`); on built-in kinds a
/// name without a `/` only from [`STANDARD_FINALIZERS`]; never both `orphan` and
/// `foregroundDeletion` (apimachinery's `ValidateFinalizers` and core's
/// `validateKubeFinalizerName`).
pub(crate) fn finalizers(meta: &Value, builtin: bool, causes: &mut Vec<Cause>) {
    let Some(list) = meta["finalizers"].as_array() else {
        return;
    };
    let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    for (i, name) in names.iter().enumerate() {
        let field = format!("metadata.finalizers[{i}]");
        for problem in label_key_problems(name) {
            causes.push(Cause::invalid(field.clone(), &json!(name), &problem));
        }
        if builtin && !name.contains('/') && !STANDARD_FINALIZERS.contains(name) {
            causes.push(Cause::invalid(
                field,
                &json!(name),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        causes.push(Cause::invalid(
            "metadata.finalizers",
            &meta["finalizers"],
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

fn label_key_problems(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut problems = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() || !validate_name(p, NameRule::Subdomain).is_empty() {
            problems.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_owned());
        }
    }
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if !ok {
        problems.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_owned());
    }
    problems
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

/// The field path kube-apiserver writes for a JSON pointer (`/spec/selector` →
/// `spec.selector`).
fn field_of(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

/// A `field is immutable` problem if the value at `pointer` changed from `old`.
pub(crate) fn immutable(
    object: &Value,
    old: Option<&Value>,
    pointer: &str,
    causes: &mut Vec<Cause>,
) {
    let Some(old) = old else {
        return;
    };
    let new = object.pointer(pointer).unwrap_or(&Value::Null);
    if old.pointer(pointer).unwrap_or(&Value::Null) != new {
        causes.push(Cause::invalid(field_of(pointer), new, "field is immutable"));
    }
}

/// A `Required value` problem if the value at `pointer` is absent, null or empty.
pub(crate) fn required(object: &Value, pointer: &str, causes: &mut Vec<Cause>) {
    let empty = match object.pointer(pointer) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(_) => false,
    };
    if empty {
        causes.push(Cause::required(field_of(pointer)));
    }
}

/// A `Not supported` problem if the value at `pointer` is set and not one of `supported`.
pub(crate) fn one_of(object: &Value, pointer: &str, supported: &[&str], causes: &mut Vec<Cause>) {
    let value = object.pointer(pointer).unwrap_or(&Value::Null);
    if !value.is_null() && !value.as_str().is_some_and(|v| supported.contains(&v)) {
        causes.push(Cause::not_supported(field_of(pointer), value, supported));
    }
}

/// A problem if the integer at `pointer` is set and below `min`.
pub(crate) fn at_least(object: &Value, pointer: &str, min: i64, causes: &mut Vec<Cause>) {
    let value = object.pointer(pointer).unwrap_or(&Value::Null);
    if value.as_i64().is_some_and(|v| v < min) {
        causes.push(Cause::invalid(
            field_of(pointer),
            value,
            &format!("must be greater than or equal to {min}"),
        ));
    }
}

/// The problems of a map of resource quantities at `field` (`spec.hard`): each value a
/// quantity, none negative.
pub(crate) fn quantities(map: &Value, field: &str, causes: &mut Vec<Cause>) {
    for (name, written) in map.as_object().into_iter().flatten() {
        quantity(written, &format!("{field}[{name}]"), causes);
    }
}

/// The problems of one quantity at `field`: it parses and is not negative.
pub(crate) fn quantity(written: &Value, field: &str, causes: &mut Vec<Cause>) {
    match written
        .as_str()
        .and_then(setpoint_core::quantity::milli_value)
    {
        None => causes.push(Cause::invalid(
            field,
            written,
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )),
        Some(v) if v < 0 => causes.push(Cause::invalid(
            field,
            written,
            "must be greater than or equal to 0",
        )),
        Some(_) => {}
    }
}

/// The values a volume's or claim's `accessModes` may take.
pub(crate) const ACCESS_MODES: &[&str] = &[
    "ReadWriteOnce",
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOncePod",
];

/// The problems of `accessModes` at `pointer`: at least one, each known.
pub(crate) fn access_modes(object: &Value, pointer: &str, causes: &mut Vec<Cause>) {
    required(object, pointer, causes);
    let modes = object.pointer(pointer).and_then(Value::as_array);
    for (i, mode) in modes.into_iter().flatten().enumerate() {
        if !mode.as_str().is_some_and(|m| ACCESS_MODES.contains(&m)) {
            causes.push(Cause::not_supported(
                format!("{}[{i}]", field_of(pointer)),
                mode,
                ACCESS_MODES,
            ));
        }
    }
}
