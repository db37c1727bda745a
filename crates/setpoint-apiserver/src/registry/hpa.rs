//! HorizontalPodAutoscalers, served as `autoscaling/v2` and `autoscaling/v1` from one storage
//! (the v2 form, under `/registry/horizontalpodautoscalers/`), as kube-apiserver serves them:
//! the v2 defaults (`minReplicas` 1, a CPU target of 80 % when no metric is given, the
//! `behavior` defaults when a behavior is given), validation of bounds, metrics and policies,
//! the conversion between the two versions, and the `kubectl get hpa` row
//! (`NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE`, targets like `cpu: 12%/50%`).
//!
//! The v1 form has one CPU target only; what it cannot say (other metrics, `behavior`, the
//! conditions) rides in `autoscaling.alpha.kubernetes.io/*` annotations, so a v1 round trip
//! keeps it.

use serde_json::{json, Map, Value};
use setpoint_core::Cause;

const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// The CPU target an HPA without metrics gets.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

fn cpu_metric(utilization: i64) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && m["resource"]["target"]["type"] == "Utilization"
}

fn default_rules(rules: &mut Map<String, Value>, up: bool) {
    if rules
        .get("stabilizationWindowSeconds")
        .is_none_or(Value::is_null)
    {
        rules.insert(
            "stabilizationWindowSeconds".into(),
            json!(if up { 0 } else { 300 }),
        );
    }
    if rules.get("selectPolicy").is_none_or(Value::is_null) {
        rules.insert("selectPolicy".into(), json!("Max"));
    }
    if rules.get("policies").is_none_or(Value::is_null) {
        let policies = if up {
            json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                   {"type": "Percent", "value": 100, "periodSeconds": 15}])
        } else {
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
        };
        rules.insert("policies".into(), policies);
    }
}

/// The v2 defaults.
pub(crate) fn default_v2(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("minReplicas").is_none_or(Value::is_null) {
        spec.insert("minReplicas".into(), json!(1));
    }
    if spec.get("metrics").is_none_or(Value::is_null) {
        spec.insert(
            "metrics".into(),
            json!([cpu_metric(DEFAULT_CPU_UTILIZATION)]),
        );
    }
    if let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) {
        for (key, up) in [("scaleUp", true), ("scaleDown", false)] {
            if behavior.get(key).is_none_or(Value::is_null) {
                behavior.insert(key.into(), json!({}));
            }
            if let Some(rules) = behavior.get_mut(key).and_then(Value::as_object_mut) {
                default_rules(rules, up);
            }
        }
    }
}

/// The v1 defaults.
pub(crate) fn default_v1(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        if spec.get("minReplicas").is_none_or(Value::is_null) {
            spec.insert("minReplicas".into(), json!(1));
        }
    }
}

fn bounds(spec: &Value, causes: &mut Vec<Cause>) {
    let target = &spec["scaleTargetRef"];
    for field in ["kind", "name"] {
        if target[field].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("spec.scaleTargetRef.{field}")));
        }
    }
    let min = spec["minReplicas"].as_i64().unwrap_or(1);
    let max = spec["maxReplicas"].as_i64().unwrap_or(0);
    if min < 1 {
        causes.push(Cause::invalid(
            "spec.minReplicas",
            &spec["minReplicas"],
            "must be greater than or equal to 1",
        ));
    }
    if max < min.max(1) {
        causes.push(Cause::invalid(
            "spec.maxReplicas",
            &spec["maxReplicas"],
            "must be greater than or equal to `minReplicas`",
        ));
    }
}

/// Validation of a v2 object.
pub(crate) fn validate_v2(object: &Value, causes: &mut Vec<Cause>) {
    let spec = &object["spec"];
    bounds(spec, causes);
    for (i, m) in spec["metrics"].as_array().into_iter().flatten().enumerate() {
        let path = format!("spec.metrics[{i}]");
        let kind = m["type"].as_str().unwrap_or_default();
        let (source, target) = match kind {
            "Resource" => ("resource", &m["resource"]["target"]),
            "Pods" => ("pods", &m["pods"]["target"]),
            "Object" => ("object", &m["object"]["target"]),
            "External" => ("external", &m["external"]["target"]),
            "ContainerResource" => ("containerResource", &m["containerResource"]["target"]),
            _ => {
                causes.push(Cause::not_supported(
                    format!("{path}.type"),
                    &m["type"],
                    &[
                        "ContainerResource",
                        "External",
                        "Object",
                        "Pods",
                        "Resource",
                    ],
                ));
                continue;
            }
        };
        if m[source].is_null() {
            causes.push(Cause::required(format!("{path}.{source}")));
            continue;
        }
        let tpath = format!("{path}.{source}.target");
        match target["type"].as_str() {
            Some("Utilization") => {
                if target["averageUtilization"].as_i64().is_none_or(|u| u < 1) {
                    causes.push(Cause::invalid(
                        format!("{tpath}.averageUtilization"),
                        &target["averageUtilization"],
                        "must be greater than 0",
                    ));
                }
            }
            Some("Value") | Some("AverageValue") => {}
            _ => causes.push(Cause::not_supported(
                format!("{tpath}.type"),
                &target["type"],
                &["AverageValue", "Utilization", "Value"],
            )),
        }
    }
    for dir in ["scaleUp", "scaleDown"] {
        let rules = &spec["behavior"][dir];
        let path = format!("spec.behavior.{dir}");
        if let Some(w) = rules["stabilizationWindowSeconds"].as_i64() {
            if !(0..=3600).contains(&w) {
                causes.push(Cause::invalid(
                    format!("{path}.stabilizationWindowSeconds"),
                    &rules["stabilizationWindowSeconds"],
                    "must be between 0 and 3600",
                ));
            }
        }
        for (i, p) in rules["policies"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let ppath = format!("{path}.policies[{i}]");
            if p["value"].as_i64().is_none_or(|v| v < 1) {
                causes.push(Cause::invalid(
                    format!("{ppath}.value"),
                    &p["value"],
                    "must be greater than zero",
                ));
            }
            if p["periodSeconds"]
                .as_i64()
                .is_none_or(|s| !(1..=1800).contains(&s))
            {
                causes.push(Cause::invalid(
                    format!("{ppath}.periodSeconds"),
                    &p["periodSeconds"],
                    "must be between 1 and 1800",
                ));
            }
            if !matches!(p["type"].as_str(), Some("Pods" | "Percent")) {
                causes.push(Cause::not_supported(
                    format!("{ppath}.type"),
                    &p["type"],
                    &["Percent", "Pods"],
                ));
            }
        }
    }
}

/// Validation of a v1 object.
pub(crate) fn validate_v1(object: &Value, causes: &mut Vec<Cause>) {
    let spec = &object["spec"];
    bounds(spec, causes);
    if let Some(t) = spec["targetCPUUtilizationPercentage"].as_i64() {
        if t < 1 {
            causes.push(Cause::invalid(
                "spec.targetCPUUtilizationPercentage",
                &spec["targetCPUUtilizationPercentage"],
                "must be greater than 0",
            ));
        }
    }
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
pub(crate) fn v2_to_v1(mut object: Value) -> Value {
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
pub(crate) fn v1_to_v2(mut object: Value) -> Value {
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

/// One metric's `current/target` text, as kubectl's HPA printer writes it.
fn metric_text(spec: &Value, current: Option<&Value>) -> String {
    let unknown = "<unknown>".to_owned();
    let (source, name) = match spec["type"].as_str().unwrap_or_default() {
        "Resource" => ("resource", spec["resource"]["name"].as_str()),
        "ContainerResource" => (
            "containerResource",
            spec["containerResource"]["name"].as_str(),
        ),
        "Pods" => ("pods", None),
        "Object" => ("object", None),
        "External" => ("external", None),
        _ => return "<unknown type>".into(),
    };
    let target = &spec[source]["target"];
    let cur = current.map(|c| &c[source]["current"]);
    let text = match target["type"].as_str() {
        Some("Utilization") => format!(
            "{}/{}%",
            cur.and_then(|c| c["averageUtilization"].as_i64())
                .map_or(unknown, |u| format!("{u}%")),
            target["averageUtilization"].as_i64().unwrap_or(0)
        ),
        Some("AverageValue") => format!(
            "{}/{} (avg)",
            cur.and_then(|c| c["averageValue"].as_str())
                .map_or(unknown, str::to_owned),
            target["averageValue"].as_str().unwrap_or_default()
        ),
        _ => format!(
            "{}/{}",
            cur.and_then(|c| c["value"].as_str())
                .map_or(unknown, str::to_owned),
            target["value"].as_str().unwrap_or_default()
        ),
    };
    match name {
        Some(n) => format!("{n}: {text}"),
        None => text,
    }
}

/// The TARGETS cell: each metric's `current/target` (the first two, then `+ N more...`).
pub(crate) fn targets(object: &Value) -> String {
    let specs = object["spec"]["metrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let currents = object["status"]["currentMetrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let shown: Vec<String> = specs
        .iter()
        .take(2)
        .enumerate()
        .map(|(i, s)| {
            let current = currents.get(i).filter(|c| c["type"] == s["type"]);
            metric_text(s, current)
        })
        .collect();
    let mut out = shown.join(", ");
    if specs.len() > 2 {
        out.push_str(&format!(" + {} more...", specs.len() - 2));
    }
    out
}

/// The REFERENCE cell: `Kind/name`.
pub(crate) fn reference(object: &Value) -> String {
    let t = &object["spec"]["scaleTargetRef"];
    format!(
        "{}/{}",
        t["kind"].as_str().unwrap_or_default(),
        t["name"].as_str().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
