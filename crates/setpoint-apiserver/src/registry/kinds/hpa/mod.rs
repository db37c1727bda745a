//! HorizontalPodAutoscalers, served as `autoscaling/v2` and `autoscaling/v1` from one storage
//! (the v2 form, under `/registry/horizontalpodautoscalers/`), as kube-apiserver serves them:
//! defaults and validation ([`spec`]), the conversion between the two versions ([`convert`]),
//! and the `kubectl get hpa` row (`NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE`,
//! [`table`]).

mod convert;
mod spec;
mod table;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    let identity = |version, strategy: Arc<dyn Strategy>| {
        Identity {
            group: "autoscaling",
            version,
            kind: "HorizontalPodAutoscaler",
            plural: "horizontalpodautoscalers",
            singular: "horizontalpodautoscaler",
            short_names: &["hpa"],
            categories: &["all"],
            namespaced: true,
            verbs: ALL_VERBS,
        }
        .build(strategy, |g| vec![status(g)])
    };
    vec![identity("v2", Arc::new(V2)), identity("v1", Arc::new(V1))]
}

fn columns() -> Vec<Column> {
    vec![
        Column::name(),
        Column::new("Reference", 0),
        Column::new("Targets", 0),
        Column::integer("MinPods", 0),
        Column::integer("MaxPods", 0),
        Column::integer("Replicas", 0),
        Column::new("Age", 0),
    ]
}

/// The row of an HPA in its v2 form.
fn cells(v2: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name_cell(v2),
        json!(table::reference(v2)),
        json!(table::targets(v2)),
        int_cell(&v2["spec"]["minReplicas"]),
        int_cell(&v2["spec"]["maxReplicas"]),
        int_cell(&v2["status"]["currentReplicas"]),
        age_cell(v2, now),
    ]
}

fn initial_status(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert(
            "status".into(),
            json!({"currentReplicas": 0, "desiredReplicas": 0}),
        );
    }
}

/// autoscaling/v2, the stored form.
#[derive(Debug)]
struct V2;

#[async_trait]
impl Strategy for V2 {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<autoscaling::v2::HorizontalPodAutoscaler>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<autoscaling::v2::HorizontalPodAutoscaler>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        spec::default_v2(object);
    }

    fn initialize(&self, object: &mut Value) {
        initial_status(object);
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        spec::validate_v2(object, &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        columns()
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        cells(o, now)
    }
}

/// autoscaling/v1, stored as v2.
#[derive(Debug)]
struct V1;

#[async_trait]
impl Strategy for V1 {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<autoscaling::v1::HorizontalPodAutoscaler>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<autoscaling::v1::HorizontalPodAutoscaler>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        spec::default_v1(object);
    }

    fn initialize(&self, object: &mut Value) {
        initial_status(object);
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        spec::validate_v1(object, &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        columns()
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        cells(&convert::v1_to_v2(o.clone()), now)
    }

    fn to_storage(&self, object: Value) -> Value {
        convert::v1_to_v2(object)
    }
    fn serves_as_stored(&self) -> bool {
        false
    }


    fn served_from_storage(&self, object: Value) -> Value {
        convert::v2_to_v1(object)
    }
}

#[cfg(test)]
mod tests {
    use super::convert::{v1_to_v2, v2_to_v1};
    use super::spec::{cpu_metric, default_v2, validate_v2};
    use super::table::{reference, targets};
    use serde_json::{json, Value};

    fn v1() -> Value {
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "x"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                     "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50},
            "status": {"currentReplicas": 0, "desiredReplicas": 0}})
    }

    #[test]
    fn v1_should_round_trip_through_v2_storage() {
        let stored = v1_to_v2(v1());
        assert_eq!(stored["spec"]["metrics"][0], cpu_metric(50));
        assert_eq!(v2_to_v1(stored), v1());
    }

    #[test]
    fn v1_without_a_target_should_be_stored_with_the_default_cpu_target() {
        let mut o = v1();
        o["spec"]
            .as_object_mut()
            .unwrap()
            .remove("targetCPUUtilizationPercentage");
        let stored = v1_to_v2(o);
        assert_eq!(stored["spec"]["metrics"], json!([cpu_metric(80)]));
        assert_eq!(
            v2_to_v1(stored)["spec"]["targetCPUUtilizationPercentage"],
            80
        );
    }

    #[test]
    fn v2_only_fields_should_survive_a_v1_round_trip() {
        let mut v2 = v1_to_v2(v1());
        v2["spec"]["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 5}});
        v2["spec"]["metrics"]
            .as_array_mut()
            .unwrap()
            .push(cpu_metric(1).clone());
        v2["spec"]["metrics"][1]["resource"]["name"] = json!("memory");
        default_v2(&mut v2);
        let back = v1_to_v2(v2_to_v1(v2.clone()));
        assert_eq!(back["spec"], v2["spec"]);
    }

    #[test]
    fn defaults_should_fill_min_replicas_metrics_and_behavior() {
        let mut o = json!({"spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}}});
        default_v2(&mut o);
        assert_eq!(o["spec"]["minReplicas"], 1);
        assert_eq!(o["spec"]["metrics"][0], cpu_metric(80));
        assert_eq!(
            o["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            5
        );
        assert_eq!(o["spec"]["behavior"]["scaleUp"]["policies"][0]["value"], 4);
        assert_eq!(o["spec"]["behavior"]["scaleDown"]["selectPolicy"], "Max");
    }

    #[test]
    fn validation_should_reject_bad_bounds_and_targets() {
        let mut o = v1_to_v2(v1());
        o["spec"]["maxReplicas"] = json!(0);
        o["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] = json!(0);
        let mut causes = Vec::new();
        validate_v2(&o, &mut causes);
        let fields: Vec<_> = causes.iter().map(|c| c.field.clone()).collect();
        assert_eq!(
            fields,
            vec![
                "spec.maxReplicas".to_owned(),
                "spec.metrics[0].resource.target.averageUtilization".to_owned()
            ]
        );
    }

    #[test]
    fn targets_should_print_like_kubectl() {
        let mut o = v1_to_v2(v1());
        assert_eq!(targets(&o), "cpu: <unknown>/50%");
        o["status"]["currentMetrics"] = json!([{"type": "Resource",
            "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]);
        assert_eq!(targets(&o), "cpu: 12%/50%");
        assert_eq!(reference(&o), "Deployment/x");
    }
}
