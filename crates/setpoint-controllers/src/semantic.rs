//! Kubernetes' semantic equality on JSON, where a null, an empty object and an empty list
//! equal an absent field: what the Deployment and ControllerRevision loops compare templates by.

use serde_json::Value;

/// Drops nulls, empty objects and empty arrays from `value`, recursively; whether `value` is
/// now empty itself.
pub(crate) fn drop_empty(value: &mut Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => {
            map.retain(|_, v| !drop_empty(v));
            map.is_empty()
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                drop_empty(item);
            }
            items.is_empty()
        }
        _ => false,
    }
}
