//! `Object`, `External` and raw `Resource` (`averageValue`) metrics: each formula with values
//! a wrong formula would get wrong, the tolerance, and the errors and conditions.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::observe::{ConditionStatus, PodInfo, PodMetric, PodPhase, ReadyCondition, Recommender};

const NOW: Duration = Duration::from_secs(10_000);

fn pod(name: &str, ready: bool) -> PodInfo {
    PodInfo {
        name: name.into(),
        phase: PodPhase::Running,
        deleting: false,
        start_time: Some(Duration::from_secs(1_000)),
        ready: Some(ReadyCondition {
            status: if ready {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            last_transition: Duration::from_secs(2_000),
        }),
        requests: BTreeMap::new(),
    }
}

/// `ready` ready pods and `unready` unready ones, spec and status replicas both their sum.
fn pods(ready: usize, unready: usize) -> Observation {
    let mut p: Vec<PodInfo> = (0..ready).map(|i| pod(&format!("r{i}"), true)).collect();
    p.extend((0..unready).map(|i| pod(&format!("u{i}"), false)));
    let n = i32::try_from(p.len()).unwrap();
    Observation {
        spec_replicas: n,
        status_replicas: n,
        pods: p,
        ..Default::default()
    }
}

fn tuning() -> HpaTuning {
    HpaTuning::default()
}

#[test]
fn object_value_should_scale_ready_pods_by_the_ratio() {
    // 7 on a target of 5 is 1.4; three of four pods are ready: ceil(1.4 × 3) = 5, where
    // ceil(1.4 × 4) would be 6 and ceil(7 / 5) would be 2.
    let o = pods(3, 1);
    let p = value_replicas(4, 7_000, ValueGoal::Value(5_000), &o, &tuning()).unwrap();
    assert_eq!(p.replicas, 5);
    assert_eq!(p.current, CurrentValueMilli::Value(7_000));
    assert!((p.usage_ratio - 1.4).abs() < 1e-12);
}

#[test]
fn object_value_within_tolerance_should_keep_current_even_without_pods() {
    let o = Observation {
        spec_replicas: 4,
        ..Default::default()
    };
    let p = value_replicas(4, 5_400, ValueGoal::Value(5_000), &o, &tuning()).unwrap();
    assert_eq!(p.replicas, 4, "1.08 is inside 0.1");
    assert_eq!(
        value_replicas(4, 5_600, ValueGoal::Value(5_000), &o, &tuning()),
        Err(MetricError::NoPods),
        "1.12 is outside: the ready pods are needed"
    );
}

#[test]
fn object_value_at_zero_replicas_should_be_ceil_of_ratio() {
    let o = Observation::default();
    let p = value_replicas(0, 7_000, ValueGoal::Value(5_000), &o, &tuning()).unwrap();
    assert_eq!(p.replicas, 2);
}

#[test]
fn average_value_should_divide_by_the_target_not_scale_ready_pods() {
    // 7 over a per-replica target of 2 with 2 replicas: ratio 1.75 → ceil(7 / 2) = 4
    // (ceil(1.75 × 2) would also be 4, so use one unready pod: it changes nothing here).
    let o = pods(1, 1);
    let p = value_replicas(2, 7_000, ValueGoal::AverageValue(2_000), &o, &tuning()).unwrap();
    assert_eq!(p.replicas, 4, "ready-pod scaling would give ceil(1.75) = 2");
    assert_eq!(p.current, CurrentValueMilli::AverageValue(3_500));
    assert!((p.usage_ratio - 1.75).abs() < 1e-12);
}

#[test]
fn average_value_within_tolerance_should_keep_status_replicas() {
    // 4.1 / (2 × 2) = 1.025: Kubernetes answers with status.replicas, not spec.replicas.
    let mut o = pods(2, 0);
    o.spec_replicas = 3;
    let p = value_replicas(3, 4_100, ValueGoal::AverageValue(2_000), &o, &tuning()).unwrap();
    assert_eq!(p.replicas, 2);
    assert_eq!(p.current, CurrentValueMilli::AverageValue(2_050));
    // With no replicas yet the ratio is infinite and the answer is ceil(value / target).
    let o = Observation {
        spec_replicas: 1,
        ..Default::default()
    };
    let p = value_replicas(1, 4_100, ValueGoal::AverageValue(2_000), &o, &tuning()).unwrap();
    assert_eq!(p.replicas, 3);
}

fn with_cpu(mut o: Observation, usage: &[(&str, i64)]) -> Observation {
    let m = usage
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                PodMetric {
                    value_milli: *v,
                    timestamp: NOW,
                    window: Duration::from_secs(30),
                },
            )
        })
        .collect();
    o.metrics.insert("cpu".into(), m);
    o
}

#[test]
fn raw_average_value_should_need_no_requests() {
    // 300m average on 200m: ratio 1.5 → ceil(1.5 × 4) = 6; the pods have no requests.
    let o = with_cpu(
        pods(4, 0),
        &[("r0", 300), ("r1", 300), ("r2", 300), ("r3", 300)],
    );
    let p = raw_resource_replicas(4, 200, "cpu", &o, NOW, &tuning()).unwrap();
    assert_eq!(
        (p.replicas, p.raw_average_milli, p.utilization),
        (6, 300, None)
    );
    assert!(matches!(
        resource_replicas(4, 50, "cpu", &o, NOW, &tuning()),
        Err(MetricError::MissingRequest(_))
    ));
}

#[test]
fn raw_missing_pods_should_take_the_target_on_scale_down() {
    // Three of four pods at 100m on a 200m target (ratio 0.5). Ignoring the missing pod:
    // ceil(0.5 × 3) = 2. At the target: (300 + 200) / 4 = 125 → ceil(0.625 × 4) = 3.
    let o = with_cpu(pods(4, 0), &[("r0", 100), ("r1", 100), ("r2", 100)]);
    let p = raw_resource_replicas(4, 200, "cpu", &o, NOW, &tuning()).unwrap();
    assert_eq!(p.replicas, 3);
    assert_eq!(p.raw_average_milli, 100, "reported before rebalancing");
}

#[test]
fn raw_missing_pods_should_count_as_zero_on_scale_up() {
    // Two of five pods at 300m on 200m (ratio 1.5, naive ceil(1.5 × 2) = 3). At 0 the
    // average is 120m: the direction reverses, so the count stays.
    let o = with_cpu(pods(5, 0), &[("r0", 300), ("r1", 300)]);
    let p = raw_resource_replicas(5, 200, "cpu", &o, NOW, &tuning()).unwrap();
    assert_eq!(p.replicas, 5);
}

fn object(goal: ValueGoal) -> MetricTarget {
    MetricTarget::Object {
        key: "o".into(),
        kind: "ConfigMap".into(),
        metric: ".data.depth".into(),
        goal,
    }
}

fn external(goal: ValueGoal) -> MetricTarget {
    MetricTarget::External {
        key: "e".into(),
        metric: "configmaps:data.depth".into(),
        goal,
    }
}

fn spec(metrics: Vec<MetricTarget>) -> HpaSpec {
    HpaSpec {
        metrics,
        ..HpaSpec::cpu(1, 20, 50)
    }
}

fn scaling_active(r: &Recommendation) -> (&'static str, bool, String) {
    let c = r.condition(ConditionType::ScalingActive).unwrap();
    (c.reason, c.status, c.message.clone())
}

#[test]
fn recommender_should_name_the_winning_object_or_external_metric() {
    let mut o = pods(2, 0);
    o.values.insert("o".into(), Ok(7_000));
    o.values.insert("e".into(), Ok(9_000));
    let mut hpa = HpaRecommender::new(
        spec(vec![
            object(ValueGoal::Value(5_000)),
            external(ValueGoal::AverageValue(1_000)),
        ]),
        tuning(),
    )
    .unwrap();
    let r = hpa.recommend(NOW, &o);
    // Object: ceil(1.4 × 2) = 3; External: ceil(9 / 1) = 9, which wins.
    assert_eq!(r.proposal, Some(9));
    let (reason, status, message) = scaling_active(&r);
    assert_eq!((reason, status), ("ValidMetricFound", true));
    assert!(
        message.ends_with("from external metric configmaps:data.depth"),
        "{message}"
    );
    assert_eq!(
        r.current_metrics,
        vec![
            MetricValue {
                index: 0,
                current: CurrentValue::Value(7_000)
            },
            MetricValue {
                index: 1,
                current: CurrentValue::AverageValue(4_500)
            },
        ]
    );
}

#[test]
fn failed_object_metric_should_block_a_scale_down_and_say_why() {
    let mut o = with_cpu(
        pods(4, 0),
        &[("r0", 10), ("r1", 10), ("r2", 10), ("r3", 10)],
    );
    for p in &mut o.pods {
        p.requests.insert("cpu".into(), 1_000);
    }
    o.values.insert(
        "o".into(),
        Err("ConfigMap default/q has no field .data.depth".into()),
    );
    let mut hpa = HpaRecommender::new(
        spec(vec![
            ResourceTarget {
                resource: "cpu".into(),
                average_utilization: 50,
            }
            .into(),
            object(ValueGoal::Value(5_000)),
        ]),
        tuning(),
    )
    .unwrap();
    let r = hpa.recommend(NOW, &o);
    assert_eq!(r.replicas, 4, "cpu alone would scale down to 1");
    let (reason, status, message) = scaling_active(&r);
    assert_eq!((reason, status), ("FailedGetObjectMetric", false));
    assert!(message.contains("has no field .data.depth"), "{message}");
    // A failure while another metric scales up does not block it.
    o.values.insert("o".into(), Ok(20_000));
    let r = hpa.recommend(NOW, &o);
    assert_eq!(r.proposal, Some(16), "ceil(4 × 4)");
}

#[test]
fn unread_external_metric_should_fail_with_its_reason() {
    let mut hpa =
        HpaRecommender::new(spec(vec![external(ValueGoal::Value(1_000))]), tuning()).unwrap();
    let r = hpa.recommend(NOW, &pods(2, 0));
    assert_eq!(r.replicas, 2);
    assert_eq!(scaling_active(&r).0, "FailedGetExternalMetric");
    assert!(HpaRecommender::new(spec(vec![external(ValueGoal::Value(0))]), tuning()).is_err());
}

#[test]
fn pid_law_should_use_the_object_ratio() {
    // The HPA-equivalent PID on an Object value at twice its target: ceil(3 × 2) = 6.
    let cfg = crate::PidAutoscalerConfig {
        metrics: vec![object(ValueGoal::Value(5_000))],
        ..crate::PidAutoscalerConfig::hpa_equivalent(1, 20, 50)
    };
    let mut pid = crate::PidAutoscaler::new(cfg).unwrap();
    let mut o = pods(3, 0);
    o.values.insert("o".into(), Ok(10_000));
    assert_eq!(pid.recommend(NOW, &o).replicas, 6);
    // An AverageValue ratio is value / (target × replicas): 12 / (2 × 3) = 2 → 6 as well.
    let cfg = crate::PidAutoscalerConfig {
        metrics: vec![object(ValueGoal::AverageValue(2_000))],
        ..crate::PidAutoscalerConfig::hpa_equivalent(1, 20, 50)
    };
    let mut pid = crate::PidAutoscaler::new(cfg).unwrap();
    o.values.insert("o".into(), Ok(12_000));
    assert_eq!(pid.recommend(NOW, &o).replicas, 6);
}
