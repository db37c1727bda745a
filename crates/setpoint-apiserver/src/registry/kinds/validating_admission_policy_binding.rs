//! admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding: applies a
//! ValidatingAdmissionPolicy to the requests its `matchResources` select, with its parameters
//! (`paramRef`) and what a failure does (`validationActions`: Deny, Warn, Audit).
//! Cluster-scoped; defaults and validation are in `registry/admission_policies.rs`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::admission_policies;
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicyBinding",
        plural: "validatingadmissionpolicybindings",
        singular: "validatingadmissionpolicybinding",
        short_names: &[],
        categories: &["api-extensions"],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Bindings), |_| vec![])]
}

#[derive(Debug)]
struct Bindings;

#[async_trait]
impl Strategy for Bindings {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ValidatingAdmissionPolicyBinding>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ValidatingAdmissionPolicyBinding>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        admission_policies::binding_defaults(object);
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        causes.extend(admission_policies::validate_binding(object));
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("PolicyName", 0),
            Column::new("ParamRef", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let param_ref = &o["spec"]["paramRef"];
        let shown = match (param_ref["namespace"].as_str(), param_ref["name"].as_str()) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            (None, Some(name)) => format!("*/{name}"),
            _ if param_ref.is_object() => "*/*".to_owned(),
            _ => "<unset>".to_owned(),
        };
        vec![
            name_cell(o),
            json!(o["spec"]["policyName"].as_str().unwrap_or_default()),
            json!(shown),
            age_cell(o, now),
        ]
    }
}
