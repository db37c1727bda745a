//! core/v1 Namespace: cluster-scoped, named by RFC 1123 labels, held by its own
//! `spec.finalizers` (`kubernetes` by default, removed through `namespaces/finalize`) and
//! `Terminating` while deleted.

mod finalize;

pub(crate) use finalize::finalize;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{json, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::defaults::{default, object_at};
use crate::registry::fields::{self, Field};
use crate::registry::identity::{status, Identity};
use crate::registry::strategy::{
    round_trip, schema_of, NameRule, Propagation, Strategy, TypedSchema,
};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::{ResourceDef, Subresource};

/// Namespaces have no `deletecollection`.
const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        categories: &[],
        namespaced: false,
        verbs: VERBS,
    }
    .build(Arc::new(Namespaces), |g| {
        vec![
            Subresource {
                name: "finalize",
                kind: g.clone(),
                verbs: &["update"],
            },
            status(g),
        ]
    })]
}

const FIELDS: &[Field] = &[("status.phase", "/status/phase", "")];

#[derive(Debug)]
struct Namespaces;

/// The label every namespace gets with its own name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

#[async_trait]
impl Strategy for Namespaces {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Namespace>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Namespace>()
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            default(map, "spec", json!({}));
        }
        // Every namespace carries its own name as a label, so selectors can pick namespaces
        // by name (admission webhooks' namespaceSelector, network policies).
        if let Some(name) = object["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
        {
            let labels = &mut object["metadata"]["labels"];
            if !labels.is_object() {
                *labels = json!({});
            }
            labels[NAME_LABEL] = json!(name);
        }
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "finalizers", json!(["kubernetes"]));
        }
    }

    fn initialize(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({"phase": "Active"}));
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        object_meta(object)
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::new("Status", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            json!(o["status"]["phase"].as_str().unwrap_or("")),
            age_cell(o, now),
        ]
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(FIELDS, namespaced)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(FIELDS, object)
    }

    /// The namespace's own `spec.finalizers` hold it: no propagation finalizer.
    fn deletion_finalizer(&self, _propagation: Option<Propagation>) -> Option<&'static str> {
        None
    }

    fn mark_deleting(&self, object: &mut Value) {
        object["status"]["phase"] = json!("Terminating");
    }

    /// Held by its `spec.finalizers` too, as kube-apiserver's namespace storage does.
    fn held(&self, object: &Value) -> bool {
        object["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    }
}
