//! storage.k8s.io/v1 CSINode (cluster-scoped, named after its node): the CSI drivers installed
//! on a node. Each driver has a name, unique on the node, and a node ID. Stored only (node
//! agents with CSI drivers would write it); its row counts the drivers.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::storage::v1::CSINode;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSINode",
        plural: "csinodes",
        singular: "csinode",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(CsiNodes), |_| vec![])]
}

#[derive(Debug)]
struct CsiNodes;

#[async_trait]
impl Strategy for CsiNodes {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<CSINode>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<CSINode>()
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let mut names = BTreeSet::new();
        let drivers = object["spec"]["drivers"].as_array();
        for (i, driver) in drivers.into_iter().flatten().enumerate() {
            let at = format!("spec.drivers[{i}]");
            match driver["name"].as_str() {
                None | Some("") => causes.push(Cause::required(format!("{at}.name"))),
                Some(name) => {
                    if !names.insert(name) {
                        causes.push(Cause::duplicate(format!("{at}.name"), &driver["name"]));
                    }
                }
            }
            if driver["nodeID"].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("{at}.nodeID")));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::integer("Drivers", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let drivers = o["spec"]["drivers"].as_array().map_or(0, Vec::len);
        vec![name_cell(o), json!(drivers), age_cell(o, now)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_should_be_named_once_with_node_ids() {
        let o = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
            {"name": "a.example.com", "nodeID": "n1"}, {"name": "a.example.com"}]}});
        let fields: Vec<String> = futures::executor::block_on(CsiNodes.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.drivers[1].name", "spec.drivers[1].nodeID"]);
        assert_eq!(CsiNodes.cells(&o, Utc::now())[1], 2);
    }
}
