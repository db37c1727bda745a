//! apps/v1 ReplicaSet: one replica by default, the template's pod defaults, a selector that
//! matches the template and never changes, `generation`, the `scale` subresource, the
//! `kubectl get replicasets` row and `status.replicas` for field selectors.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{json, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::fields::{self, Field};
use crate::registry::defaults::{default, object_at};
use crate::registry::identity::{scale, status, Identity, ALL_VERBS};
use crate::registry::pod_template::{
    default_template, template_cells, template_columns, validate_workload, SpecReplicas,
};
use crate::registry::strategy::{round_trip, schema_of, ScaleView, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        short_names: &["rs"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ReplicaSets), |g| vec![scale(), status(g)])]
}

const FIELDS: &[Field] = &[("status.replicas", "/status/replicas", "0")];

#[derive(Debug)]
pub(crate) struct ReplicaSets;

#[async_trait]
impl Strategy for ReplicaSets {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ReplicaSet>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ReplicaSet>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "replicas", json!(1));
        }
        default_template(object);
    }

    fn initialize(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({}));
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_workload(object, old, &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            Column::name(),
            Column::integer("Desired", 0),
            Column::integer("Current", 0),
            Column::integer("Ready", 0),
            Column::new("Age", 0),
        ];
        columns.extend(template_columns());
        columns
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let (spec, status) = (&o["spec"], &o["status"]);
        let mut row = vec![
            name_cell(o),
            int_cell(&spec["replicas"]),
            int_cell(&status["replicas"]),
            int_cell(&status["readyReplicas"]),
            age_cell(o, now),
        ];
        row.extend(template_cells(o));
        row
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(FIELDS, namespaced)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(FIELDS, object)
    }

    fn scale(&self) -> Option<&dyn ScaleView> {
        Some(&SpecReplicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_integer_fields_should_read_as_zero() {
        let rs = json!({"metadata": {"name": "r", "namespace": "d"}, "status": {}});
        assert_eq!(ReplicaSets.field_set(&rs)["status.replicas"], "0");
    }
}
