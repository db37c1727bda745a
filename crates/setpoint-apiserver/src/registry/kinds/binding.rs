//! core/v1 Binding (`bindings`, create only): the older way to assign a pod to a node, a
//! `Binding` named after the pod posted to its namespace. It does what `pods/binding` does
//! (`pod/binding.rs`); nothing of its own is stored.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Binding;
use serde_json::Value;
use setpoint_core::Cause;

use crate::registry::identity::Identity;
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{name_cell, Column};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "Binding",
        plural: "bindings",
        singular: "binding",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: &["create"],
    }
    .build(Arc::new(Bindings), |_| vec![])]
}

#[derive(Debug)]
struct Bindings;

#[async_trait]
impl Strategy for Bindings {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Binding>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Binding>()
    }

    fn binds_pods(&self) -> bool {
        true
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        if object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required("metadata.name"));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name()]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o)]
    }
}
