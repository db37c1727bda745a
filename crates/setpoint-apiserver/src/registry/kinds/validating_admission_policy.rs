//! admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: CEL validations that
//! `admission/` enforces on the requests a binding applies them to (cluster-scoped, with a
//! `status` subresource). Defaults and validation are in `registry/admission_policies.rs`.
//! Setpoint does not type-check policies, so `status.typeChecking` stays unset.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::admission_policies;
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicy",
        plural: "validatingadmissionpolicies",
        singular: "validatingadmissionpolicy",
        short_names: &[],
        categories: &["api-extensions"],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Policies), |gvk| vec![status(gvk)])]
}

#[derive(Debug)]
struct Policies;

#[async_trait]
impl Strategy for Policies {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ValidatingAdmissionPolicy>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ValidatingAdmissionPolicy>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        admission_policies::policy_defaults(object);
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        causes.extend(admission_policies::validate_policy(object));
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Validations", 0),
            Column::new("ParamKind", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let validations = o["spec"]["validations"].as_array().map_or(0, Vec::len);
        let param_kind = match o["spec"]["paramKind"].as_object() {
            Some(k) => format!(
                "{} {}",
                k.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
                k.get("kind").and_then(Value::as_str).unwrap_or_default()
            ),
            None => "<unset>".to_owned(),
        };
        vec![
            name_cell(o),
            json!(validations.to_string()),
            json!(param_kind),
            age_cell(o, now),
        ]
    }
}
