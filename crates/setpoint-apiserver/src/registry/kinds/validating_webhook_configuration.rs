//! admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration: the webhooks the API server calls for
//! validation of the requests they match (cluster-scoped). Defaults and validation are shared
//! with the other webhook configuration kind (`registry/webhooks.rs`); `admission/` calls
//! the webhooks. Its row counts them, as kubectl prints it.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::webhooks::{self, WebhookKind};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
        singular: "validatingwebhookconfiguration",
        short_names: &[],
        categories: &["api-extensions"],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ValidatingWebhooks), |_| vec![])]
}

#[derive(Debug)]
struct ValidatingWebhooks;

#[async_trait]
impl Strategy for ValidatingWebhooks {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ValidatingWebhookConfiguration>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ValidatingWebhookConfiguration>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        new["webhooks"] != old["webhooks"]
    }

    fn apply_defaults(&self, object: &mut Value) {
        webhooks::apply_defaults(object, WebhookKind::Validating);
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        causes.extend(webhooks::validate(object, WebhookKind::Validating));
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::integer("Webhooks", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let count = o["webhooks"].as_array().map_or(0, Vec::len);
        vec![name_cell(o), json!(count), age_cell(o, now)]
    }
}
