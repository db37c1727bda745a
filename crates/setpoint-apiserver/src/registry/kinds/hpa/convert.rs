//! The conversion between the two HorizontalPodAutoscaler versions, stored as `autoscaling/v2`.
//! The v1 form has one CPU target only; what it cannot say (other metrics, `behavior`, the
//! conditions) rides in `autoscaling.alpha.kubernetes.io/*` annotations, so a v1 round trip
//! keeps it.

use serde_json::{json, Map, Value};

use super::spec::{cpu_metric, default_v2};

const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";

fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && m["resource"]["target"]["type"] == "Utilization"
}

fn annotations(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = object.get_mut("metadata")?.as_object_mut()?;
    if !meta.get("annotations").is_some_and(Value::is_object) {
        meta.insert("annotations".into(), json!({}));
    }
    meta.get_mut("annotations")?.as_object_mut()
}

fn take_annotation(object: &mut Value, key: &str) -> Option<Value> {
    let meta = object.get_mut("metadata")?.as_object_mut()?;
    let ann = meta.get_mut("annotations")?.as_object_mut()?;
    let raw = ann.remove(key)?;
    if ann.is_empty() {
        meta.remove("annotations");
    }
    serde_json::from_str(raw.as_str()?).ok()
}

/// The v1 form of a stored (v2) object.
pub(super) fn v2_to_v1(mut object: Value) -> Value {
    let spec = object["spec"].take();
    let status = object["status"].take();
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let (cpu, other): (Vec<Value>, Vec<Value>) = metrics.into_iter().partition(is_cpu_utilization);
    let mut v1_spec = json!({
        "scaleTargetRef": spec["scaleTargetRef"],
        "minReplicas": spec["minReplicas"],
        "maxReplicas": spec["maxReplicas"],
    });
    if let Some(c) = cpu.first() {
        v1_spec["targetCPUUtilizationPercentage"] =
            c["resource"]["target"]["averageUtilization"].clone();
    }
    let extras = [
        (
            METRICS_ANNOTATION,
            (!other.is_empty()).then(|| json!(other)),
        ),
        (
            BEHAVIOR_ANNOTATION,
            Some(spec["behavior"].clone()).filter(|b| !b.is_null()),
        ),
        (
            CONDITIONS_ANNOTATION,
            Some(status["conditions"].clone()).filter(|c| !c.is_null()),
        ),
    ];
    for (key, value) in extras {
        let Some(value) = value else { continue };
        if let Some(ann) = annotations(&mut object) {
            ann.insert(key.into(), json!(value.to_string()));
        }
    }
    let mut v1_status = json!({
        "currentReplicas": status["currentReplicas"].as_i64().unwrap_or(0),
        "desiredReplicas": status["desiredReplicas"].as_i64().unwrap_or(0),
    });
    for key in ["observedGeneration", "lastScaleTime"] {
        if !status[key].is_null() {
            v1_status[key] = status[key].clone();
        }
    }
    if let Some(current) = status["currentMetrics"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
    {
        let u = &current["resource"]["current"]["averageUtilization"];
        if !u.is_null() {
            v1_status["currentCPUUtilizationPercentage"] = u.clone();
        }
    }
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!("autoscaling/v1"));
        map.insert("spec".into(), v1_spec);
        map.insert("status".into(), v1_status);
    }
    object
}

/// The stored (v2) form of a v1 object.
pub(super) fn v1_to_v2(mut object: Value) -> Value {
    let spec = object["spec"].take();
    let status = object["status"].take();
    let mut metrics = Vec::new();
    if let Some(t) = spec["targetCPUUtilizationPercentage"].as_i64() {
        metrics.push(cpu_metric(t));
    }
    if let Some(Value::Array(other)) = take_annotation(&mut object, METRICS_ANNOTATION) {
        metrics.extend(other);
    }
    let mut v2_spec = json!({
        "scaleTargetRef": spec["scaleTargetRef"],
        "minReplicas": spec["minReplicas"],
        "maxReplicas": spec["maxReplicas"],
    });
    if !metrics.is_empty() {
        v2_spec["metrics"] = json!(metrics);
    }
    if let Some(b) = take_annotation(&mut object, BEHAVIOR_ANNOTATION) {
        v2_spec["behavior"] = b;
    }
    let conditions = take_annotation(&mut object, CONDITIONS_ANNOTATION);
    let mut v2_status = json!({
        "currentReplicas": status["currentReplicas"].as_i64().unwrap_or(0),
        "desiredReplicas": status["desiredReplicas"].as_i64().unwrap_or(0),
    });
    for key in ["observedGeneration", "lastScaleTime"] {
        if !status[key].is_null() {
            v2_status[key] = status[key].clone();
        }
    }
    if let Some(c) = conditions {
        v2_status["conditions"] = c;
    }
    if let Some(u) = status["currentCPUUtilizationPercentage"].as_i64() {
        v2_status["currentMetrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": u}}}]);
    }
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!("autoscaling/v2"));
        map.insert("spec".into(), v2_spec);
        map.insert("status".into(), v2_status);
    }
    // Stored defaulted as v2 (a v1 object without a CPU target gets the 80 % one), so that a
    // later v2 write does not change the spec by defaulting it.
    default_v2(&mut object);
    object
}

