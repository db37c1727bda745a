//! apps/v1 DaemonSet: one pod per matching node. Defaults as kube-apiserver's: a rolling
//! update with at most one pod unavailable and none surging, ten revisions kept, the
//! template's pod defaults. Its selector matches the template and never changes, its pods
//! restart `Always`. `generation`, the `status` subresource and the `kubectl get ds` row.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::{default, object_at, set_status};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::pod_template::{
    default_template, template_cells, template_columns, validate_workload,
};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, labels_string, name_cell, Column};
use crate::registry::validation::{at_least, object_meta, one_of};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        short_names: &["ds"],
        categories: &["all"],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(DaemonSets), |g| vec![status(g)])]
}

#[derive(Debug)]
struct DaemonSets;

#[async_trait]
impl Strategy for DaemonSets {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<DaemonSet>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<DaemonSet>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "updateStrategy", json!({"type": "RollingUpdate"}));
            if let Some(strategy) = spec.get_mut("updateStrategy").and_then(Value::as_object_mut) {
                default(strategy, "type", json!("RollingUpdate"));
                if strategy.get("type") == Some(&json!("RollingUpdate")) {
                    default(strategy, "rollingUpdate", json!({}));
                    if let Some(ru) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                        default(ru, "maxUnavailable", json!(1));
                        default(ru, "maxSurge", json!(0));
                    }
                }
            }
        }
        default_template(object);
    }

    fn initialize(&self, object: &mut Value) {
        set_status(
            object,
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}),
        );
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_workload(object, old, &mut causes);
        one_of(object, "/spec/template/spec/restartPolicy", &["Always"], &mut causes);
        one_of(object, "/spec/updateStrategy/type", &["OnDelete", "RollingUpdate"], &mut causes);
        at_least(object, "/spec/minReadySeconds", 0, &mut causes);
        at_least(object, "/spec/revisionHistoryLimit", 0, &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            Column::name(),
            Column::integer("Desired", 0),
            Column::integer("Current", 0),
            Column::integer("Ready", 0),
            Column::integer("Up-to-date", 0),
            Column::integer("Available", 0),
            Column::new("Node Selector", 0),
            Column::new("Age", 0),
        ];
        columns.extend(template_columns());
        columns
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let status = &o["status"];
        let mut row = vec![
            name_cell(o),
            int_cell(&status["desiredNumberScheduled"]),
            int_cell(&status["currentNumberScheduled"]),
            int_cell(&status["numberReady"]),
            int_cell(&status["updatedNumberScheduled"]),
            int_cell(&status["numberAvailable"]),
            json!(labels_string(&o["spec"]["template"]["spec"]["nodeSelector"])),
            age_cell(o, now),
        ];
        row.extend(template_cells(o));
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_should_roll_one_pod_at_a_time() {
        let mut o = json!({"metadata": {"name": "ds", "namespace": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
        DaemonSets.prepare_create(&mut o);
        assert_eq!(o["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}));
        assert_eq!(o["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(o["status"]["numberReady"], 0);
        assert!(futures::executor::block_on(DaemonSets.validate(&o, None)).is_empty());
        let mut moved = o.clone();
        moved["spec"]["selector"] = json!({"matchLabels": {"app": "b"}});
        moved["spec"]["template"]["metadata"]["labels"] = json!({"app": "b"});
        let causes = futures::executor::block_on(DaemonSets.validate(&moved, Some(&o)));
        assert_eq!(causes[0].field, "spec.selector");
        let mut never = o.clone();
        never["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        let causes = futures::executor::block_on(DaemonSets.validate(&never, None));
        assert_eq!(causes[0].field, "spec.template.spec.restartPolicy");
    }
}
