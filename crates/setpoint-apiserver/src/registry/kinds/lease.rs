//! coordination.k8s.io/v1 Lease: leader election and node heartbeats; its row shows the
//! holder.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Leases), |_| vec![])]
}

#[derive(Debug)]
struct Leases;

#[async_trait]
impl Strategy for Leases {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Lease>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Lease>()
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        object_meta(object)
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::new("Holder", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            json!(o["spec"]["holderIdentity"].as_str().unwrap_or("")),
            age_cell(o, now),
        ]
    }
}
