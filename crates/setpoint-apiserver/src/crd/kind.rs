//! The [`Strategy`] of the CustomResourceDefinition kind itself (what discovery says about it
//! is in `registry/kinds/custom_resource_definition.rs`): typed as `k8s-openapi`'s
//! `CustomResourceDefinition`, defaulted and validated by [`super::definition`] with
//! apimachinery's generic metadata rules, a new CRD's status, its `kubectl get crds` row, the
//! cleanup finalizer every deletion adds, and a write changes what is served.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};
use setpoint_core::Cause;

use super::controller::CLEANUP_FINALIZER;
use super::definition::{default_definition, validate_definition};
use crate::registry::strategy::{round_trip, schema_of, TypedSchema};
use crate::registry::table::{name_cell, Column};
use crate::registry::{validate_finalizers, validate_metadata, Propagation, Strategy};

/// The CustomResourceDefinition strategy, for `registry::builtin_resources`.
pub(crate) fn definitions() -> Arc<dyn Strategy> {
    Arc::new(Definitions)
}

#[derive(Debug)]
struct Definitions;

#[async_trait]
impl Strategy for Definitions {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<CustomResourceDefinition>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<CustomResourceDefinition>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        default_definition(object);
    }

    /// As kube-apiserver's CRD strategy: no names accepted yet, the storage version recorded
    /// as stored. The create answer carries this status (kube-rs' `crd_api` example unwraps
    /// it); the CRD controller then fills in names and conditions.
    fn initialize(&self, object: &mut Value) {
        let Some(map) = object.as_object_mut() else {
            return;
        };
        let stored: Vec<Value> = map
            .get("spec")
            .and_then(|s| s["versions"].as_array())
            .and_then(|vs| vs.iter().find(|v| v["storage"] == json!(true)))
            .map(|v| v["name"].clone())
            .into_iter()
            .collect();
        map.insert(
            "status".into(),
            json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored}),
        );
    }

    /// CRDs are validated by apiextensions with apimachinery's generic metadata rules.
    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        validate_metadata(&object["metadata"], &mut causes);
        validate_finalizers(&object["metadata"], false, &mut causes);
        causes.extend(validate_definition(object, old));
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column {
                format: "date-time".into(),
                ..Column::new("Created At", 0)
            },
        ]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o), o["metadata"]["creationTimestamp"].clone()]
    }

    fn defines_resources(&self) -> bool {
        true
    }

    /// Held until the CRD controller has deleted every object of the resource.
    fn deletion_finalizer(&self, _propagation: Option<Propagation>) -> Option<&'static str> {
        Some(CLEANUP_FINALIZER)
    }
}
