//! The data of ConfigMaps and Secrets: key names and total size, as kube-apiserver validates
//! them.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use setpoint_core::Cause;

/// The keys of `data`, `binaryData` and `stringData`: config keys, no key twice.
pub(crate) fn data_keys(object: &Value, causes: &mut Vec<Cause>) {
    let mut seen = BTreeSet::new();
    for field in ["data", "binaryData", "stringData"] {
        for key in object[field].as_object().into_iter().flat_map(|m| m.keys()) {
            let ok = !key.is_empty()
                && key.len() <= 253
                && key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !ok {
                causes.push(Cause::invalid(
                    field,
                    &json!(key),
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ));
            }
            if field != "stringData" && !seen.insert(key.clone()) {
                causes.push(Cause::invalid(
                    field,
                    &json!(key),
                    "duplicate of key present in data",
                ));
            }
        }
    }
}

/// The most bytes of data a ConfigMap or Secret may hold (kube-apiserver's `MaxSecretSize`).
const MAX_DATA_BYTES: usize = 1024 * 1024;

/// The bytes a ConfigMap's `data` and `binaryData` (a Secret's, `secret`: `data` and `stringData`) hold
/// together, decoded, at most [`MAX_DATA_BYTES`]. kube-apiserver reports a ConfigMap's excess
/// on the whole object (its field path prints as `[]`) and a Secret's on `data`.
pub(crate) fn data_size(secret: bool, object: &Value, causes: &mut Vec<Cause>) {
    let mut total: usize = 0;
    for (field, encoded) in [
        ("data", secret),
        ("binaryData", true),
        ("stringData", false),
    ] {
        for value in object[field]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            let text = value.as_str().unwrap_or_default();
            let size = if encoded {
                base64_decoded_len(text)
            } else {
                text.len()
            };
            total = total.saturating_add(size);
        }
    }
    if total > MAX_DATA_BYTES {
        let field = if secret { "data" } else { "[]" };
        causes.push(Cause::new(
            "FieldValueTooLong",
            field,
            format!("{field}: Too long: must have at most {MAX_DATA_BYTES} bytes"),
        ));
    }
}

/// The length of what standard base64 `text` decodes to (exact for valid padded base64).
fn base64_decoded_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (text.len() / 4).saturating_mul(3).saturating_sub(padding)
}
