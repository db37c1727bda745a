//! What the HPA loop reads, turned into `setpoint-control`'s terms: an `autoscaling/v2` spec
//! as an [`HpaSpec`] (with its `behavior`; `Resource`, `Object` and `External` metrics), pods as [`PodInfo`], `metrics.k8s.io` PodMetrics as
//! per-resource [`PodMetrics`]. Times become [`Duration`]s since the Unix epoch, the clock the
//! loop passes to the recommender.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::{
    HPAScalingRules, HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use setpoint_control::hpa::{
    Behavior, HpaSpec, MetricTarget as Target, PolicyKind, ResourceGoal, ScalingPolicy,
    ScalingRules, SelectPolicy, ValueGoal,
};
use setpoint_control::{ConditionStatus, PodInfo, PodMetric, PodPhase, ReadyCondition};

use super::metric_source::{external_key, object_key};
use crate::scheduler::milli_value;

/// A wall-clock instant as the recommender's clock.
pub(crate) fn since_epoch(t: &Time) -> Duration {
    let secs = t.0.as_second();
    let nanos = t.0.subsec_nanosecond();
    Duration::new(
        u64::try_from(secs).unwrap_or(0),
        u32::try_from(nanos).unwrap_or(0),
    )
}

/// Now, as the recommender's clock.
pub(crate) fn now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

fn rules(given: Option<&HPAScalingRules>, default: ScalingRules) -> ScalingRules {
    let Some(given) = given else {
        return default;
    };
    let policies = match &given.policies {
        Some(p) => p
            .iter()
            .map(|p| ScalingPolicy {
                kind: if p.type_ == "Pods" {
                    PolicyKind::Pods
                } else {
                    PolicyKind::Percent
                },
                value: p.value,
                period: Duration::from_secs(u64::try_from(p.period_seconds).unwrap_or(0)),
            })
            .collect(),
        None => default.policies,
    };
    ScalingRules {
        stabilization_window: given
            .stabilization_window_seconds
            .map_or(default.stabilization_window, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            }),
        select_policy: match given.select_policy.as_deref() {
            Some("Min") => SelectPolicy::Min,
            Some("Disabled") => SelectPolicy::Disabled,
            Some(_) => SelectPolicy::Max,
            None => default.select_policy,
        },
        policies,
    }
}

/// An `autoscaling/v2` spec in the recommender's terms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Translated {
    /// What the recommender takes.
    pub(crate) spec: HpaSpec,
    /// The `MetricSpec` of each of `spec.metrics`, in the same order (for status and for
    /// reading `Object` and `External` values).
    pub(crate) sources: Vec<MetricSpec>,
    /// Where each of `sources` sits in the spec's `metrics`: status keeps one entry per listed
    /// metric, as Kubernetes does, so `kubectl get hpa` pairs each target with its value.
    pub(crate) positions: Vec<usize>,
    /// How many metrics the spec lists.
    pub(crate) listed: usize,
    /// The types of the metrics that are not evaluated (`Pods`, `ContainerResource`, or a
    /// target the type does not allow).
    pub(crate) unsupported: Vec<String>,
}

/// The spec as the recommender takes it, with the metrics it cannot evaluate set aside.
pub(crate) fn hpa_spec(spec: &HorizontalPodAutoscalerSpec) -> Translated {
    let mut unsupported = Vec::new();
    let mut metrics = Vec::new();
    let mut sources = Vec::new();
    let mut positions = Vec::new();
    let listed = spec.metrics.as_ref().map_or(0, Vec::len);
    for (i, m) in spec.metrics.iter().flatten().enumerate() {
        match metric_target(m) {
            Some(t) => {
                metrics.push(t);
                sources.push(m.clone());
                positions.push(i);
            }
            None => unsupported.push(m.type_.clone()),
        }
    }
    let behavior = spec.behavior.as_ref();
    let hpa = HpaSpec {
        min_replicas: spec.min_replicas.unwrap_or(1),
        max_replicas: spec.max_replicas,
        metrics,
        behavior: Behavior {
            scale_up: rules(
                behavior.and_then(|b| b.scale_up.as_ref()),
                ScalingRules::default_scale_up(),
            ),
            scale_down: rules(
                behavior.and_then(|b| b.scale_down.as_ref()),
                ScalingRules::default_scale_down(),
            ),
        },
    };
    Translated {
        spec: hpa,
        sources,
        positions,
        listed,
        unsupported,
    }
}

fn milli(q: Option<&Quantity>) -> Option<i64> {
    milli_value(&q?.0).and_then(|m| i64::try_from(m).ok())
}

/// A `Value` or `AverageValue` target.
fn value_goal(t: &MetricTarget) -> Option<ValueGoal> {
    match t.type_.as_str() {
        "Value" => milli(t.value.as_ref()).map(ValueGoal::Value),
        "AverageValue" => milli(t.average_value.as_ref()).map(ValueGoal::AverageValue),
        _ => None,
    }
}

fn metric_target(m: &MetricSpec) -> Option<Target> {
    match m.type_.as_str() {
        "Resource" => {
            let r = m.resource.as_ref()?;
            let goal = match r.target.type_.as_str() {
                "Utilization" => ResourceGoal::Utilization(r.target.average_utilization?),
                "AverageValue" => {
                    ResourceGoal::AverageValue(milli(r.target.average_value.as_ref())?)
                }
                _ => return None,
            };
            Some(Target::Resource {
                resource: r.name.clone(),
                goal,
            })
        }
        "Object" => {
            let o = m.object.as_ref()?;
            Some(Target::Object {
                key: object_key(o),
                kind: o.described_object.kind.clone(),
                metric: o.metric.name.clone(),
                goal: value_goal(&o.target)?,
            })
        }
        "External" => {
            let e = m.external.as_ref()?;
            Some(Target::External {
                key: external_key(e),
                metric: e.metric.name.clone(),
                goal: value_goal(&e.target)?,
            })
        }
        _ => None,
    }
}

/// A pod as the recommender sees it.
pub(crate) fn pod_info(pod: &Pod) -> PodInfo {
    let status = pod.status.as_ref();
    let phase = match status.and_then(|s| s.phase.as_deref()) {
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        _ => PodPhase::Pending,
    };
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| ReadyCondition {
            status: match c.status.as_str() {
                "True" => ConditionStatus::True,
                "False" => ConditionStatus::False,
                _ => ConditionStatus::Unknown,
            },
            last_transition: c
                .last_transition_time
                .as_ref()
                .map_or(Duration::ZERO, since_epoch),
        });
    let mut requests: BTreeMap<String, i64> = BTreeMap::new();
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    for resource in ["cpu", "memory"] {
        let mut sum = Some(0i64);
        for c in containers {
            let q = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| milli_value(&q.0))
                .and_then(|m| i64::try_from(m).ok());
            sum = match (sum, q) {
                (Some(s), Some(q)) => s.checked_add(q),
                _ => None,
            };
        }
        if let Some(s) = sum.filter(|_| !containers.is_empty()) {
            requests.insert(resource.to_owned(), s);
        }
    }
    PodInfo {
        name: pod.metadata.name.clone().unwrap_or_default(),
        phase,
        deleting: pod.metadata.deletion_timestamp.is_some(),
        start_time: status.and_then(|s| s.start_time.as_ref()).map(since_epoch),
        ready,
        requests,
    }
}

/// A Go duration as metrics.k8s.io writes `window` (`10s`, `1m30s`, `500ms`, `1.5s`).
fn go_duration(s: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(end);
        let number: f64 = number.parse().ok()?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * scale;
        rest = next;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// `PodMetrics` objects (JSON) as per-resource, per-pod usage: each pod's containers summed.
pub(crate) fn pod_metrics(items: &[Value]) -> BTreeMap<String, BTreeMap<String, PodMetric>> {
    let mut out: BTreeMap<String, BTreeMap<String, PodMetric>> = BTreeMap::new();
    for item in items {
        let Some(name) = item["metadata"]["name"].as_str() else {
            continue;
        };
        let Some(timestamp) = item["timestamp"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
            .map(Duration::from_millis)
        else {
            continue;
        };
        let window = item["window"]
            .as_str()
            .and_then(go_duration)
            .unwrap_or_default();
        let containers = item["containers"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for resource in ["cpu", "memory"] {
            let mut sum = 0i64;
            let mut complete = !containers.is_empty();
            for c in containers {
                match c["usage"][resource]
                    .as_str()
                    .and_then(milli_value)
                    .and_then(|m| i64::try_from(m).ok())
                {
                    Some(v) => sum = sum.saturating_add(v),
                    None => complete = false,
                }
            }
            if complete {
                out.entry(resource.to_owned()).or_default().insert(
                    name.to_owned(),
                    PodMetric {
                        value_milli: sum,
                        timestamp,
                        window,
                    },
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_duration_should_parse_what_metrics_server_writes() {
        assert_eq!(go_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(go_duration("3 parsecs"), None);
    }

    #[test]
    fn pod_metrics_should_sum_containers_per_resource() {
        let items = vec![
            json!({"metadata": {"name": "p"}, "timestamp": "2026-01-01T00:00:10Z",
            "window": "10s", "containers": [
                {"name": "a", "usage": {"cpu": "250m", "memory": "1Ki"}},
                {"name": "b", "usage": {"cpu": "1", "memory": "1Ki"}}]}),
        ];
        let m = pod_metrics(&items);
        assert_eq!(m["cpu"]["p"].value_milli, 1250);
        assert_eq!(m["memory"]["p"].value_milli, 2_048_000);
        assert_eq!(m["cpu"]["p"].window, Duration::from_secs(10));
    }

    #[test]
    fn hpa_spec_should_translate_every_supported_metric_and_set_aside_the_rest() {
        let spec: HorizontalPodAutoscalerSpec = serde_json::from_value(json!({
        "scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 9,
        "metrics": [
            {"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}},
            {"type": "Pods", "pods": {"metric": {"name": "x"},
                "target": {"type": "AverageValue", "averageValue": "1"}}},
            {"type": "Resource", "resource": {"name": "memory",
                "target": {"type": "AverageValue", "averageValue": "500m"}}},
            {"type": "Object", "object": {"describedObject": {"apiVersion": "v1",
                "kind": "ConfigMap", "name": "q"}, "metric": {"name": ".data.depth"},
                "target": {"type": "Value", "value": "5"}}},
            {"type": "External", "external": {"metric": {"name": "configmaps:data.n"},
                "target": {"type": "AverageValue", "averageValue": "2k"}}},
            {"type": "Object", "object": {"describedObject": {"kind": "ConfigMap",
                "name": "q"}, "metric": {"name": ".data.depth"},
                "target": {"type": "Utilization", "averageUtilization": 5}}}
        ]}))
        .unwrap();
        let t = hpa_spec(&spec);
        assert_eq!(t.unsupported, vec!["Pods".to_owned(), "Object".to_owned()]);
        assert_eq!(t.sources.len(), 4);
        let m = &t.spec.metrics;
        assert_eq!(
            m[0],
            Target::Resource {
                resource: "cpu".into(),
                goal: ResourceGoal::Utilization(60)
            }
        );
        assert_eq!(
            m[1],
            Target::Resource {
                resource: "memory".into(),
                goal: ResourceGoal::AverageValue(500)
            }
        );
        assert_eq!(
            m[2],
            Target::Object {
                key: "object:v1/ConfigMap/q:.data.depth".into(),
                kind: "ConfigMap".into(),
                metric: ".data.depth".into(),
                goal: ValueGoal::Value(5_000)
            }
        );
        let Target::External { key, goal, .. } = &m[3] else {
            panic!("{:?}", m[3]);
        };
        assert_eq!(*goal, ValueGoal::AverageValue(2_000_000));
        assert_eq!(*key, external_key(t.sources[3].external.as_ref().unwrap()));
    }

    #[test]
    fn pod_without_a_request_in_some_container_should_have_none() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "b"}]}}))
        .unwrap();
        let info = pod_info(&pod);
        assert!(info.requests.is_empty());
        assert_eq!(info.phase, PodPhase::Pending);
    }
}
