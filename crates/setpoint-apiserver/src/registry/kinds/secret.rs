//! core/v1 Secret: `type` defaults to `Opaque` and never changes; `stringData` is written into
//! `data` (base64, its keys winning) and never stored, as kube-apiserver's conversion does; its
//! keys and total size are validated; field selectors may use `type`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use serde_json::{json, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::config_data::{data_keys, data_size};
use crate::registry::defaults::default;
use crate::registry::fields::{self, Field};
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Secrets), |_| vec![])]
}

const FIELDS: &[Field] = &[("type", "/type", "")];

#[derive(Debug)]
struct Secrets;

#[async_trait]
impl Strategy for Secrets {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Secret>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Secret>()
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            default(map, "type", json!("Opaque"));
            if let Some(Value::Object(strings)) = map.remove("stringData") {
                default(map, "data", json!({}));
                if let Some(data) = map.get_mut("data").and_then(Value::as_object_mut) {
                    for (key, value) in strings {
                        let text = value.as_str().unwrap_or_default();
                        data.insert(key, json!(STANDARD.encode(text)));
                    }
                }
            }
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        data_keys(object, &mut causes);
        data_size(true, object, &mut causes);
        if let Some(old) = old {
            if old["type"] != object["type"] {
                causes.push(Cause::invalid(
                    "type",
                    &object["type"],
                    "field is immutable",
                ));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Type", 0),
            Column::integer("Data", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let n = o["data"].as_object().map_or(0, |m| m.len());
        vec![
            name_cell(o),
            json!(o["type"].as_str().unwrap_or("")),
            json!(n),
            age_cell(o, now),
        ]
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(FIELDS, namespaced)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(FIELDS, object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_should_be_encoded_into_data_and_win() {
        let mut s = json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "admin"}});
        Secrets.apply_defaults(&mut s);
        assert_eq!(s, json!({"type": "Opaque", "data": {"a": "eA==", "b": "YWRtaW4="}}));
    }
}
