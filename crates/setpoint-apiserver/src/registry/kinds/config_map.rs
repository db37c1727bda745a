//! core/v1 ConfigMap: its keys and total size are validated; its row counts its keys.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::config_data::{data_keys, data_size};
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ConfigMaps), |_| vec![])]
}

#[derive(Debug)]
struct ConfigMaps;

#[async_trait]
impl Strategy for ConfigMaps {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ConfigMap>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ConfigMap>()
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        data_keys(object, &mut causes);
        data_size(false, object, &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::integer("Data", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let n = o["data"].as_object().map_or(0, |m| m.len())
            + o["binaryData"].as_object().map_or(0, |m| m.len());
        vec![name_cell(o), json!(n), age_cell(o, now)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_labels_should_be_invalid() {
        let c = json!({"metadata": {"name": "c", "labels": {"-bad": "ok", "good": "not ok!"}}});
        assert_eq!(futures::executor::block_on(ConfigMaps.validate(&c, None)).len(), 2);
    }
}
