//! apps/v1 StatefulSet: pods with stable names and storage. Defaults as kube-apiserver's: one
//! replica, `OrderedReady` pod management, a rolling update from partition 0, ten revisions
//! kept, claims retained on deletion and scale-down, the template's pod defaults and each
//! claim template's claim defaults. Its selector matches the template, its pods restart
//! `Always`, and after creation only `replicas`, `ordinals`, `template`, `updateStrategy`,
//! `persistentVolumeClaimRetentionPolicy` and `minReadySeconds` may change. `generation`, the
//! `status` and `scale` subresources and the `kubectl get sts` row.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::StatefulSet;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::{default, object_at, set_status};
use crate::registry::identity::{scale, status, Identity, ALL_VERBS};
use crate::registry::pod_template::{
    default_template, template_cells, validate_workload, SpecReplicas,
};
use crate::registry::strategy::{round_trip, schema_of, ScaleView, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{at_least, object_meta, one_of};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        short_names: &["sts"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(StatefulSets), |g| vec![scale(), status(g)])]
}

/// The spec fields an update may change.
const MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

const RETENTION: &[&str] = &["Retain", "Delete"];

#[derive(Debug)]
struct StatefulSets;

#[async_trait]
impl Strategy for StatefulSets {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<StatefulSet>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<StatefulSet>()
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
            default(spec, "podManagementPolicy", json!("OrderedReady"));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "updateStrategy", json!({"type": "RollingUpdate"}));
            if let Some(strategy) = spec.get_mut("updateStrategy").and_then(Value::as_object_mut) {
                default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate")) {
                    default(strategy, "rollingUpdate", json!({}));
                    if let Some(ru) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                        default(ru, "partition", json!(0));
                    }
                }
            }
            default(spec, "persistentVolumeClaimRetentionPolicy", json!({}));
            if let Some(p) = spec
                .get_mut("persistentVolumeClaimRetentionPolicy")
                .and_then(Value::as_object_mut)
            {
                default(p, "whenDeleted", json!("Retain"));
                default(p, "whenScaled", json!("Retain"));
            }
            let claims = spec.get_mut("volumeClaimTemplates").and_then(Value::as_array_mut);
            for claim in claims.into_iter().flatten().filter_map(Value::as_object_mut) {
                default(claim, "spec", json!({}));
                if let Some(s) = claim.get_mut("spec").and_then(Value::as_object_mut) {
                    default(s, "volumeMode", json!("Filesystem"));
                }
                default(claim, "status", json!({}));
                if let Some(s) = claim.get_mut("status").and_then(Value::as_object_mut) {
                    default(s, "phase", json!("Pending"));
                }
            }
        }
        default_template(object);
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, json!({"replicas": 0, "availableReplicas": 0}));
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_workload(object, None, &mut causes);
        one_of(object, "/spec/template/spec/restartPolicy", &["Always"], &mut causes);
        one_of(object, "/spec/podManagementPolicy", &["OrderedReady", "Parallel"], &mut causes);
        one_of(object, "/spec/updateStrategy/type", &["OnDelete", "RollingUpdate"], &mut causes);
        at_least(object, "/spec/updateStrategy/rollingUpdate/partition", 0, &mut causes);
        at_least(object, "/spec/minReadySeconds", 0, &mut causes);
        one_of(object, "/spec/persistentVolumeClaimRetentionPolicy/whenDeleted", RETENTION, &mut causes);
        one_of(object, "/spec/persistentVolumeClaimRetentionPolicy/whenScaled", RETENTION, &mut causes);
        if let Some(old) = old {
            let fixed = |spec: &Value| {
                let mut spec = spec.clone();
                if let Some(map) = spec.as_object_mut() {
                    map.retain(|k, _| !MUTABLE.contains(&k.as_str()));
                }
                spec
            };
            if fixed(&object["spec"]) != fixed(&old["spec"]) {
                causes.push(Cause::forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Ready", 0),
            Column::new("Age", 0),
            Column::new("Containers", 1),
            Column::new("Images", 1),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let [containers, images, _] = template_cells(o);
        vec![
            name_cell(o),
            json!(format!(
                "{}/{}",
                o["status"]["readyReplicas"].as_i64().unwrap_or(0),
                o["spec"]["replicas"].as_i64().unwrap_or(0)
            )),
            age_cell(o, now),
            containers,
            images,
        ]
    }

    fn scale(&self) -> Option<&dyn ScaleView> {
        Some(&SpecReplicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts() -> Value {
        json!({"metadata": {"name": "web", "namespace": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}}, "serviceName": "web",
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}})
    }

    #[test]
    fn defaults_should_match_kube_apiserver() {
        let mut o = sts();
        StatefulSets.prepare_create(&mut o);
        let spec = &o["spec"];
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(spec["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["persistentVolumeClaimRetentionPolicy"], json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
        assert_eq!(spec["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Filesystem");
        assert_eq!(spec["volumeClaimTemplates"][0]["status"]["phase"], "Pending");
        assert!(futures::executor::block_on(StatefulSets.validate(&o, None)).is_empty());
    }

    #[test]
    fn only_some_spec_fields_should_change() {
        let mut old = sts();
        StatefulSets.apply_defaults(&mut old);
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(3);
        assert!(futures::executor::block_on(StatefulSets.validate(&scaled, Some(&old))).is_empty());
        let mut renamed = old.clone();
        renamed["spec"]["serviceName"] = json!("other");
        let causes = futures::executor::block_on(StatefulSets.validate(&renamed, Some(&old)));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec");
    }
}
