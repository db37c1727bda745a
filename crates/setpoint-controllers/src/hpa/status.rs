//! An HPA's `status` from a [`Recommendation`], as the Kubernetes HPA controller writes it:
//! `currentReplicas`, `desiredReplicas`, `currentMetrics` (`Resource` metrics with
//! `averageValue` and, for a `Utilization` target, `averageUtilization`; `Object` and
//! `External` metrics with `value` or `averageValue`), `lastScaleTime`, and the `AbleToScale`,
//! `ScalingActive`, `ScalingLimited` conditions, each keeping its `lastTransitionTime` while its
//! status stays the same.

use k8s_openapi::api::autoscaling::v2::MetricSpec;
use serde_json::{json, Value};
use setpoint_control::{ConditionType, CurrentValue, Recommendation};

use super::observe::Translated;

/// A milli-unit amount as a quantity (`250m`, `2`).
pub(crate) fn milli_quantity(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

fn type_name(kind: ConditionType) -> &'static str {
    match kind {
        ConditionType::AbleToScale => "AbleToScale",
        ConditionType::ScalingActive => "ScalingActive",
        ConditionType::ScalingLimited => "ScalingLimited",
    }
}

/// The part of an autoscaler's `status` a sync keeps unless it learns better: the replica
/// counts and `lastScaleTime` of the `old` status.
pub(crate) fn carried(old: &Value) -> Value {
    let mut status = json!({
        "currentReplicas": old["currentReplicas"].as_i64().unwrap_or(0),
        "desiredReplicas": old["desiredReplicas"].as_i64().unwrap_or(0),
    });
    if !old["lastScaleTime"].is_null() {
        status["lastScaleTime"] = old["lastScaleTime"].clone();
    }
    status
}

/// One condition, keeping the previous transition time when the status did not change.
pub(crate) fn condition(
    previous: &Value,
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &str,
) -> Value {
    let status = if status { "True" } else { "False" };
    let old = previous
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind));
    let since = match old {
        Some(o) if o["status"] == status && o["lastTransitionTime"].is_string() => {
            o["lastTransitionTime"].clone()
        }
        _ => json!(now),
    };
    json!({"type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since})
}

/// The conditions of a recommendation, in the order Kubernetes lists them (`AbleToScale`,
/// `ScalingActive`, `ScalingLimited`).
pub(crate) fn conditions(rec: &Recommendation, previous: &Value, now: &str) -> Vec<Value> {
    let rank = |kind: ConditionType| match kind {
        ConditionType::AbleToScale => 0,
        ConditionType::ScalingActive => 1,
        ConditionType::ScalingLimited => 2,
    };
    let mut ordered: Vec<_> = rec.conditions.iter().collect();
    ordered.sort_by_key(|c| rank(c.kind));
    ordered
        .into_iter()
        .map(|c| {
            condition(
                previous,
                type_name(c.kind),
                c.status,
                c.reason,
                &c.message,
                now,
            )
        })
        .collect()
}

/// `status.currentMetrics` of a recommendation: one entry per metric of the spec, in its
/// order (`translated` says which spec metric each of the recommender's metrics is).
pub(crate) fn current_metrics(rec: &Recommendation, translated: &Translated) -> Vec<Value> {
    if rec.current_metrics.is_empty() {
        return Vec::new();
    }
    // One entry per metric the spec lists; one that gave no value stays an empty status
    // (`type: ""`), which `kubectl get hpa` shows as `<unknown>`.
    let mut out = vec![json!({"type": ""}); translated.listed];
    for m in &rec.current_metrics {
        let (Some(source), Some(&slot)) = (
            translated.sources.get(m.index),
            translated.positions.get(m.index),
        ) else {
            continue;
        };
        let status = match &m.current {
            CurrentValue::Resource {
                resource,
                average_utilization,
                average_value_milli,
            } => {
                let mut current = json!({"averageValue": milli_quantity(*average_value_milli)});
                if let Some(u) = average_utilization {
                    current["averageUtilization"] = json!(u);
                }
                Some(
                    json!({"type": "Resource", "resource": {"name": resource, "current": current}}),
                )
            }
            CurrentValue::Value(v) => value_status(source, json!({"value": milli_quantity(*v)})),
            CurrentValue::AverageValue(v) => {
                value_status(source, json!({"averageValue": milli_quantity(*v)}))
            }
        };
        if let (Some(status), Some(entry)) = (status, out.get_mut(slot)) {
            *entry = status;
        }
    }
    out
}

/// The status of an `Object` or `External` metric with `current`.
fn value_status(source: &MetricSpec, current: Value) -> Option<Value> {
    if let Some(o) = source.object.as_ref().filter(|_| source.type_ == "Object") {
        return Some(json!({"type": "Object", "object": {
            "describedObject": o.described_object, "metric": o.metric, "current": current}}));
    }
    let e = source
        .external
        .as_ref()
        .filter(|_| source.type_ == "External")?;
    Some(json!({"type": "External", "external": {"metric": e.metric, "current": current}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_should_keep_transition_time_while_status_holds() {
        let prev = json!([{"type": "AbleToScale", "status": "True", "lastTransitionTime": "T0"}]);
        let same = condition(&prev, "AbleToScale", true, "R", "m", "T1");
        assert_eq!(same["lastTransitionTime"], "T0");
        let flipped = condition(&prev, "AbleToScale", false, "R", "m", "T1");
        assert_eq!(flipped["lastTransitionTime"], "T1");
        assert_eq!(flipped["status"], "False");
    }

    #[test]
    fn conditions_should_be_listed_in_kubernetes_order() {
        let cond = |kind| setpoint_control::Condition {
            kind,
            status: true,
            reason: "R",
            message: String::new(),
        };
        let rec = Recommendation {
            replicas: 1,
            proposal: None,
            conditions: vec![
                cond(ConditionType::ScalingLimited),
                cond(ConditionType::AbleToScale),
                cond(ConditionType::ScalingActive),
            ],
            current_metrics: Vec::new(),
            terms: None,
        };
        let types: Vec<Value> = conditions(&rec, &Value::Null, "T")
            .into_iter()
            .map(|c| c["type"].clone())
            .collect();
        assert_eq!(
            types,
            vec![
                json!("AbleToScale"),
                json!("ScalingActive"),
                json!("ScalingLimited")
            ]
        );
    }

    #[test]
    fn current_metrics_should_report_each_metric_type_as_kubernetes_does() {
        let sources: Vec<MetricSpec> = serde_json::from_value(json!([
            {"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "AverageValue", "averageValue": "2"}}},
            {"type": "Object", "object": {"describedObject": {"apiVersion": "v1",
                "kind": "ConfigMap", "name": "q"}, "metric": {"name": ".data.depth"},
                "target": {"type": "Value", "value": "5"}}},
            {"type": "External", "external": {"metric": {"name": "configmaps:data.n",
                "selector": {"matchLabels": {"q": "x"}}},
                "target": {"type": "AverageValue", "averageValue": "2"}}}
        ]))
        .unwrap();
        // The spec lists a Pods metric (not evaluated) second, and the Object metric gave no
        // value this time: both keep their places as empty statuses.
        let translated = Translated {
            spec: setpoint_control::hpa::HpaSpec::cpu(1, 5, 50),
            sources,
            positions: vec![0, 2, 3],
            listed: 4,
            unsupported: vec!["Pods".into()],
        };
        let value = |index, current| setpoint_control::MetricValue { index, current };
        let rec = Recommendation {
            replicas: 1,
            proposal: None,
            conditions: Vec::new(),
            current_metrics: vec![
                value(
                    0,
                    CurrentValue::Resource {
                        resource: "cpu".into(),
                        average_utilization: None,
                        average_value_milli: 3_500,
                    },
                ),
                value(2, CurrentValue::AverageValue(3_500)),
            ],
            terms: None,
        };
        assert_eq!(
            current_metrics(&rec, &translated),
            vec![
                json!({"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageValue": "3500m"}}}),
                json!({"type": ""}),
                json!({"type": ""}),
                json!({"type": "External", "external": {"metric": {"name": "configmaps:data.n",
                    "selector": {"matchLabels": {"q": "x"}}},
                    "current": {"averageValue": "3500m"}}}),
            ]
        );
    }

    #[test]
    fn object_and_external_values_should_be_reported_in_their_own_form() {
        let sources: Vec<MetricSpec> = serde_json::from_value(json!([
            {"type": "Object", "object": {"describedObject": {"apiVersion": "v1",
                "kind": "ConfigMap", "name": "q"}, "metric": {"name": ".data.depth"},
                "target": {"type": "Value", "value": "5"}}}
        ]))
        .unwrap();
        let translated = Translated {
            spec: setpoint_control::hpa::HpaSpec::cpu(1, 5, 50),
            sources,
            positions: vec![0],
            listed: 1,
            unsupported: Vec::new(),
        };
        let rec = Recommendation {
            replicas: 1,
            proposal: None,
            conditions: Vec::new(),
            current_metrics: vec![setpoint_control::MetricValue {
                index: 0,
                current: CurrentValue::Value(7_000),
            }],
            terms: None,
        };
        assert_eq!(
            current_metrics(&rec, &translated),
            vec![
                json!({"type": "Object", "object": {"describedObject": {"apiVersion": "v1",
                "kind": "ConfigMap", "name": "q"}, "metric": {"name": ".data.depth"},
                "current": {"value": "7"}}})
            ]
        );
    }

    #[test]
    fn milli_quantity_should_drop_the_suffix_when_whole() {
        assert_eq!(milli_quantity(250), "250m");
        assert_eq!(milli_quantity(2000), "2");
    }
}
