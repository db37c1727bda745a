//! core/v1 ServiceAccount: its row counts its secrets; DELETE answers with the deleted object;
//! its `token` subresource issues tokens (TokenRequest).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::{json, Value};
use setpoint_core::{Cause, GroupVersionKind};

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::{ResourceDef, Subresource};

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        short_names: &["sa"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ServiceAccounts), |_| {
        // TokenRequest (`kubectl create token`): answered by `handlers/token_request.rs`.
        vec![Subresource {
            name: "token",
            kind: GroupVersionKind::new("authentication.k8s.io", "v1", "TokenRequest"),
            verbs: &["create"],
        }]
    })]
}

#[derive(Debug)]
struct ServiceAccounts;

#[async_trait]
impl Strategy for ServiceAccounts {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ServiceAccount>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ServiceAccount>()
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        object_meta(object)
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::integer("Secrets", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            json!(o["secrets"].as_array().map_or(0, Vec::len)),
            age_cell(o, now),
        ]
    }

    fn delete_returns_object(&self) -> bool {
        true
    }
}
