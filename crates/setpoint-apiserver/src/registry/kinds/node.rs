//! core/v1 Node: cluster-scoped, with a status subresource the node agent writes; its row
//! shows readiness (and `SchedulingDisabled` when cordoned), addresses and the node's software.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use serde_json::{json, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::fields::{self, Field};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Nodes), |g| vec![status(g)])]
}

const FIELDS: &[Field] = &[("spec.unschedulable", "/spec/unschedulable", "false")];

#[derive(Debug)]
struct Nodes;

#[async_trait]
impl Strategy for Nodes {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Node>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Node>()
    }

    fn has_status(&self) -> bool {
        true
    }

    fn initialize(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({}));
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        object_meta(object)
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Status", 0),
            Column::new("Roles", 0),
            Column::new("Age", 0),
            Column::new("Version", 0),
            Column::new("Internal-IP", 1),
            Column::new("External-IP", 1),
            Column::new("OS-Image", 1),
            Column::new("Kernel-Version", 1),
            Column::new("Container-Runtime", 1),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let ready = o["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .map(|c| {
                if c["status"] == "True" {
                    "Ready"
                } else {
                    "NotReady"
                }
            })
            .unwrap_or("Unknown");
        let mut status = ready.to_owned();
        if o["spec"]["unschedulable"] == json!(true) {
            status.push_str(",SchedulingDisabled");
        }
        let address = |t: &str| {
            o["status"]["addresses"]
                .as_array()
                .and_then(|a| a.iter().find(|x| x["type"] == t))
                .and_then(|x| x["address"].as_str())
                .unwrap_or("<none>")
                .to_owned()
        };
        let info = &o["status"]["nodeInfo"];
        vec![
            name_cell(o),
            json!(status),
            json!("<none>"),
            age_cell(o, now),
            json!(info["kubeletVersion"].as_str().unwrap_or("")),
            json!(address("InternalIP")),
            json!(address("ExternalIP")),
            json!(info["osImage"].as_str().unwrap_or("<unknown>")),
            json!(info["kernelVersion"].as_str().unwrap_or("<unknown>")),
            json!(info["containerRuntimeVersion"]
                .as_str()
                .unwrap_or("<unknown>")),
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
    use serde_json::json;

    #[test]
    fn absent_bool_fields_should_read_as_false() {
        // Regression (issue 14.11c): `spec.unschedulable=false` did not match a node without
        // the field; kube-apiserver formats the absent bool as `false`.
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        assert_eq!(Nodes.field_set(&node)["spec.unschedulable"], "false");
        let cordoned = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert_eq!(Nodes.field_set(&cordoned)["spec.unschedulable"], "true");
    }
}
