//! core/v1 ReplicationController: the older ReplicaSet, with an equality-only selector (a map).
//! Defaults as kube-apiserver's: an absent selector and absent labels are the template's
//! labels, one replica, the template's pod defaults. The template's labels must match the
//! selector, and its pods restart `Always`. `generation`, the `status` and `scale`
//! subresources, `status.replicas` for field selectors, and the `kubectl get rc` row.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ReplicationController;
use serde_json::{json, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::defaults::{default, object_at, set_status};
use crate::registry::fields::{self, Field};
use crate::registry::identity::{scale, status, Identity, ALL_VERBS};
use crate::registry::pod_template::{default_template, template_columns, validate_pod_spec};
use crate::registry::strategy::{
    round_trip, scale_document, schema_of, ScaleView, Strategy, TypedSchema,
};
use crate::registry::table::{age_cell, int_cell, labels_string, name_cell, Column};
use crate::registry::validation::{at_least, object_meta, one_of, required};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        short_names: &["rc"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ReplicationControllers), |g| {
        vec![scale(), status(g)]
    })]
}

const FIELDS: &[Field] = &[("status.replicas", "/status/replicas", "0")];

#[derive(Debug)]
struct ReplicationControllers;

#[async_trait]
impl Strategy for ReplicationControllers {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ReplicationController>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ReplicationController>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        let template_labels = object["spec"]["template"]["metadata"]["labels"].clone();
        let has_labels = template_labels.as_object().is_some_and(|l| !l.is_empty());
        if has_labels {
            if object["spec"]["selector"]
                .as_object()
                .is_none_or(|s| s.is_empty())
            {
                if let Some(spec) = object_at(object, &["spec"]) {
                    spec.insert("selector".into(), template_labels.clone());
                }
            }
            if object["metadata"]["labels"]
                .as_object()
                .is_none_or(|l| l.is_empty())
            {
                if let Some(meta) = object_at(object, &["metadata"]) {
                    meta.insert("labels".into(), template_labels);
                }
            }
        }
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "replicas", json!(1));
        }
        default_template(object);
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, json!({"replicas": 0}));
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        at_least(object, "/spec/replicas", 0, &mut causes);
        at_least(object, "/spec/minReadySeconds", 0, &mut causes);
        required(object, "/spec/selector", &mut causes);
        if spec["template"].is_null() {
            causes.push(Cause::required("spec.template"));
            return causes;
        }
        let labels = spec["template"]["metadata"]["labels"].as_object();
        let matches = spec["selector"].as_object().into_iter().flatten().all(|(k, v)| {
            labels.and_then(|l| l.get(k)) == Some(v)
        });
        if !matches {
            causes.push(Cause::invalid(
                "spec.template.metadata.labels",
                &spec["template"]["metadata"]["labels"],
                "`selector` does not match template `labels`",
            ));
        }
        validate_pod_spec(&spec["template"]["spec"], "spec.template.spec", &mut causes);
        one_of(object, "/spec/template/spec/restartPolicy", &["Always"], &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            Column::name(),
            Column::integer("Desired", 0),
            Column::integer("Current", 0),
            Column::integer("Ready", 0),
            Column::new("Age", 0),
        ];
        columns.extend(template_columns());
        columns
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let (spec, status) = (&o["spec"], &o["status"]);
        let containers = spec["template"]["spec"]["containers"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let list = |field: &str| -> String {
            containers
                .iter()
                .filter_map(|c| c[field].as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        vec![
            name_cell(o),
            int_cell(&spec["replicas"]),
            int_cell(&status["replicas"]),
            int_cell(&status["readyReplicas"]),
            age_cell(o, now),
            json!(list("name")),
            json!(list("image")),
            json!(labels_string(&spec["selector"])),
        ]
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(FIELDS, namespaced)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(FIELDS, object)
    }

    fn scale(&self) -> Option<&dyn ScaleView> {
        Some(&MapSelectorReplicas)
    }
}

/// The `scale` view of a replication controller: its selector is a map.
#[derive(Debug)]
struct MapSelectorReplicas;

impl ScaleView for MapSelectorReplicas {
    fn scale_of(&self, o: &Value) -> Value {
        let selector = labels_string(&o["spec"]["selector"]);
        let selector = if selector == "<none>" { String::new() } else { selector };
        scale_document(
            o,
            o["spec"]["replicas"].as_i64().unwrap_or(0),
            json!({"replicas": o["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector}),
        )
    }

    fn set_replicas(&self, o: &mut Value, replicas: i64) {
        o["spec"]["replicas"] = json!(replicas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(spec: Value) -> Value {
        json!({"metadata": {"name": "r", "namespace": "d"}, "spec": spec})
    }

    #[test]
    fn selector_and_labels_should_default_to_the_template_labels() {
        let mut o = rc(json!({"template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}));
        ReplicationControllers.apply_defaults(&mut o);
        assert_eq!(o["spec"]["selector"], json!({"app": "web"}));
        assert_eq!(o["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(o["spec"]["replicas"], 1);
        let causes = futures::executor::block_on(ReplicationControllers.validate(&o, None));
        assert!(causes.is_empty(), "{causes:?}");
        let scale = MapSelectorReplicas.scale_of(&o);
        assert_eq!(scale["status"]["selector"], "app=web");
    }

    #[test]
    fn a_mismatched_selector_and_other_restart_policies_should_be_refused() {
        let o = rc(json!({"replicas": 1, "selector": {"app": "x"}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}));
        let fields: Vec<String> = futures::executor::block_on(ReplicationControllers.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["spec.template.metadata.labels", "spec.template.spec.restartPolicy"]
        );
    }
}
