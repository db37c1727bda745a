//! apps/v1 Deployment: defaults (one replica, a 25 % rolling update, the template's pod
//! defaults), a selector that matches the template and never changes, `generation`, the
//! `scale` subresource and the `kubectl get deployments` row.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{json, Value};
use setpoint_core::{Cause};

use crate::registry::defaults::{default, object_at};
use crate::registry::identity::{scale, status, Identity, ALL_VERBS};
use crate::registry::pod_template::{
    default_template, template_cells, template_columns, validate_workload, SpecReplicas,
};
use crate::registry::strategy::{round_trip, schema_of, ScaleView, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(Deployments), |g| vec![scale(), status(g)])]
}

#[derive(Debug)]
pub(crate) struct Deployments;

#[async_trait]
impl Strategy for Deployments {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<Deployment>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<Deployment>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "replicas", json!(1));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            default(spec, "strategy", json!({"type": "RollingUpdate"}));
            if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
                default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate")) {
                    default(strategy, "rollingUpdate", json!({}));
                    if let Some(ru) = strategy
                        .get_mut("rollingUpdate")
                        .and_then(Value::as_object_mut)
                    {
                        default(ru, "maxUnavailable", json!("25%"));
                        default(ru, "maxSurge", json!("25%"));
                    }
                }
            }
        }
        default_template(object);
    }

    fn initialize(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), json!({}));
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_workload(object, old, &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            Column::name(),
            Column::new("Ready", 0),
            Column::integer("Up-to-date", 0),
            Column::integer("Available", 0),
            Column::new("Age", 0),
        ];
        columns.extend(template_columns());
        columns
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let (spec, status) = (&o["spec"], &o["status"]);
        let mut row = vec![
            name_cell(o),
            json!(format!(
                "{}/{}",
                status["readyReplicas"].as_i64().unwrap_or(0),
                spec["replicas"].as_i64().unwrap_or(0)
            )),
            int_cell(&status["updatedReplicas"]),
            int_cell(&status["availableReplicas"]),
            age_cell(o, now),
        ];
        row.extend(template_cells(o));
        row
    }

    fn scale(&self) -> Option<&dyn ScaleView> {
        Some(&SpecReplicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_defaults_should_match_kube_apiserver() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}});
        Deployments.apply_defaults(&mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn deployment_selector_must_match_template_labels() {
        let d = json!({"metadata": {"name": "d"}, "spec": {"replicas": -1, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let fields: Vec<_> = futures::executor::block_on(Deployments.validate(&d, None))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec!["spec.replicas", "spec.template.metadata.labels"]
        );
    }
}
