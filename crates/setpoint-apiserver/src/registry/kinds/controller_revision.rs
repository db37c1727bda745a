//! apps/v1 ControllerRevision: an immutable snapshot of a workload's template (`data`) at a
//! `revision` number, kept by StatefulSets and DaemonSets for rollouts and `kubectl rollout
//! undo`. Its row names the workload that controls it (`statefulset.apps/web`).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ControllerRevisions), |_| vec![])]
}

#[derive(Debug)]
struct ControllerRevisions;

#[async_trait]
impl Strategy for ControllerRevisions {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ControllerRevision>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ControllerRevision>()
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        if object["data"].is_null() {
            causes.push(Cause::new(
                "FieldValueRequired",
                "data",
                "data: Required value: data is mandatory",
            ));
        }
        let revision = &object["revision"];
        if revision.as_i64().is_some_and(|r| r < 0) {
            causes.push(Cause::invalid(
                "revision",
                revision,
                "must be greater than or equal to 0",
            ));
        }
        if let Some(old) = old {
            if old["data"] != object["data"] {
                causes.push(Cause::invalid("data", &object["data"], "field is immutable"));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Controller", 0),
            Column::integer("Revision", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            json!(controller(o)),
            int_cell(&o["revision"]),
            age_cell(o, now),
        ]
    }
}

/// The controlling owner as kubectl prints it, `<kind>.<group>/<name>` in lower case for the
/// kind and group (`statefulset.apps/web`), or `<none>`.
fn controller(o: &Value) -> String {
    let owners = o["metadata"]["ownerReferences"].as_array();
    let Some(owner) = owners
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == json!(true))
    else {
        return "<none>".to_owned();
    };
    let kind = owner["kind"].as_str().unwrap_or_default().to_lowercase();
    let group = owner["apiVersion"]
        .as_str()
        .and_then(|av| av.split_once('/'))
        .map(|(group, _)| group.to_lowercase());
    let name = owner["name"].as_str().unwrap_or_default();
    match group {
        Some(group) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(object: Value, old: Option<&Value>) -> Vec<Cause> {
        futures::executor::block_on(ControllerRevisions.validate(&object, old))
    }

    fn revision(data: Value, revision: i64) -> Value {
        json!({"metadata": {"name": "web-7d4b9c", "namespace": "default"},
            "data": data, "revision": revision})
    }

    #[test]
    fn a_revision_needs_data_and_a_nonnegative_number() {
        assert!(validate(revision(json!({"spec": {}}), 1), None).is_empty());
        let causes = validate(revision(Value::Null, -1), None);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["data", "revision"], "{causes:?}");
    }

    #[test]
    fn data_should_be_immutable_and_the_revision_number_not() {
        let old = revision(json!({"spec": {"a": 1}}), 1);
        assert!(validate(revision(json!({"spec": {"a": 1}}), 2), Some(&old)).is_empty());
        let causes = validate(revision(json!({"spec": {"a": 2}}), 1), Some(&old));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(causes[0].body().contains("field is immutable"), "{causes:?}");
    }

    #[test]
    fn the_controller_column_should_name_kind_group_and_name() {
        let mut o = revision(json!({}), 1);
        assert_eq!(controller(&o), "<none>");
        o["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"},
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "2", "controller": true},
        ]);
        assert_eq!(controller(&o), "statefulset.apps/web");
    }
}
