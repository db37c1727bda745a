//! HorizontalPodAutoscaler specs: the v2 defaults (`minReplicas` 1, a CPU target of 80 % when
//! no metric is given, the `behavior` defaults when a behavior is given), the v1 defaults, and
//! validation of bounds, metrics and policies.

use serde_json::{json, Map, Value};
use setpoint_core::Cause;

/// The CPU target an HPA without metrics gets.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// A CPU utilization metric with target `utilization` %.
pub(super) fn cpu_metric(utilization: i64) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": utilization}}})
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
pub(super) fn default_v2(object: &mut Value) {
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
pub(super) fn default_v1(object: &mut Value) {
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
pub(super) fn validate_v2(object: &Value, causes: &mut Vec<Cause>) {
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
pub(super) fn validate_v1(object: &Value, causes: &mut Vec<Cause>) {
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

