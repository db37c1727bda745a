//! HPA recommender cases, each checked against Kubernetes' documented and coded behaviour.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::observe::{
    ConditionStatus, PodInfo, PodMetric, PodMetrics, PodPhase, ReadyCondition, Recommender,
};

const S: fn(u64) -> Duration = Duration::from_secs;
const NOW: u64 = 10_000;

/// A running pod started `age` s before NOW, ready since `ready_for` s (None: not ready).
fn pod(name: &str, age: u64, ready_for: Option<u64>) -> PodInfo {
    let ready = match ready_for {
        Some(r) => ReadyCondition {
            status: ConditionStatus::True,
            last_transition: S(NOW - r),
        },
        None => ReadyCondition {
            status: ConditionStatus::False,
            last_transition: S(NOW - age),
        },
    };
    PodInfo {
        name: name.into(),
        phase: PodPhase::Running,
        deleting: false,
        start_time: Some(S(NOW - age)),
        ready: Some(ready),
        requests: BTreeMap::from([("cpu".into(), 1000), ("memory".into(), 1000)]),
    }
}

fn old_ready(name: &str) -> PodInfo {
    pod(name, 3600, Some(3000))
}

/// `(pod, utilisation %)` as a fresh 30 s-window metric of `resource`.
fn metrics(values: &[(&str, i64)]) -> PodMetrics {
    values
        .iter()
        .map(|(n, pct)| {
            (
                n.to_string(),
                PodMetric {
                    value_milli: pct * 10,
                    timestamp: S(NOW),
                    window: S(30),
                },
            )
        })
        .collect()
}

fn obs(current: i32, pods: Vec<PodInfo>, cpu: &[(&str, i64)]) -> Observation {
    Observation {
        spec_replicas: current,
        status_replicas: current,
        pods,
        metrics: BTreeMap::from([("cpu".into(), metrics(cpu))]),
        values: BTreeMap::new(),
    }
}

fn calc(o: &Observation) -> i32 {
    resource_replicas(o.spec_replicas, 50, "cpu", o, S(NOW), &HpaTuning::default())
        .unwrap()
        .replicas
}

fn ready_pods(n: usize, pct: i64) -> (Vec<PodInfo>, Vec<(String, i64)>) {
    let pods = (0..n).map(|i| old_ready(&format!("p{i}"))).collect();
    let m = (0..n).map(|i| (format!("p{i}"), pct)).collect();
    (pods, m)
}

fn as_refs(m: &[(String, i64)]) -> Vec<(&str, i64)> {
    m.iter().map(|(n, v)| (n.as_str(), *v)).collect()
}

#[test]
fn ratio_within_tolerance_should_keep_current_replicas() {
    let (pods, m) = ready_pods(5, 54);
    assert_eq!(
        calc(&obs(5, pods.clone(), &as_refs(&m))),
        5,
        "1.08 is inside 0.1"
    );
    let (_, m) = ready_pods(5, 56);
    assert_eq!(calc(&obs(5, pods, &as_refs(&m))), 6, "ceil(1.12 * 5)");
}

#[test]
fn proposal_should_be_ceil_of_ratio_times_ready_pods() {
    let (pods, m) = ready_pods(5, 100);
    assert_eq!(calc(&obs(5, pods, &as_refs(&m))), 10);
    let (pods, m) = ready_pods(10, 20);
    assert_eq!(calc(&obs(10, pods, &as_refs(&m))), 4);
}

#[test]
fn missing_pods_should_count_as_full_on_scale_down() {
    let mut pods: Vec<PodInfo> = (0..5).map(|i| old_ready(&format!("p{i}"))).collect();
    pods[4].name = "missing".into();
    let o = obs(5, pods, &[("p0", 20), ("p1", 20), ("p2", 20), ("p3", 20)]);
    // Ignoring the missing pod would give ceil(0.4 * 4) = 2; at 100 %: (80+100)/5 = 36 %.
    assert_eq!(calc(&o), 4);
}

#[test]
fn missing_pods_should_count_as_zero_on_scale_up() {
    let pods: Vec<PodInfo> = (0..5).map(|i| old_ready(&format!("p{i}"))).collect();
    let o = obs(5, pods, &[("p0", 90), ("p1", 90), ("p2", 90)]);
    // Ignoring the missing pods: ceil(1.8 * 3) = 6. At 0 %: 270/500 = 54 %, inside tolerance.
    assert_eq!(calc(&o), 5);
}

#[test]
fn unready_pods_should_count_as_zero_on_scale_up() {
    let mut pods: Vec<PodInfo> = (0..4).map(|i| old_ready(&format!("r{i}"))).collect();
    pods.extend((0..4).map(|i| pod(&format!("u{i}"), 20, None)));
    let mut m: Vec<(String, i64)> = (0..4).map(|i| (format!("r{i}"), 80)).collect();
    m.extend((0..4).map(|i| (format!("u{i}"), 10)));
    // Ready pods alone: ceil(1.6 * 4) = 7, a scale-down. Rebalanced: 320/800 = 40 %, a
    // direction change, so the HPA keeps 8.
    assert_eq!(calc(&obs(8, pods, &as_refs(&m))), 8);
}

#[test]
fn unready_pods_should_be_left_out_on_scale_down() {
    let mut pods: Vec<PodInfo> = (0..4).map(|i| old_ready(&format!("r{i}"))).collect();
    pods.extend((0..2).map(|i| pod(&format!("u{i}"), 20, None)));
    let mut m: Vec<(String, i64)> = (0..4).map(|i| (format!("r{i}"), 20)).collect();
    m.extend((0..2).map(|i| (format!("u{i}"), 90)));
    assert_eq!(calc(&obs(6, pods, &as_refs(&m))), 2, "ceil(0.4 * 4)");
}

#[test]
fn cpu_sample_from_before_readiness_should_be_unready() {
    // "b" became ready 10 s ago; its 30 s window started before that.
    let pods = vec![old_ready("a"), pod("b", 60, Some(10))];
    let o = obs(2, pods.clone(), &[("a", 100), ("b", 20)]);
    assert_eq!(calc(&o), 2, "rebalanced: (100 + 0) / 2 = 50 %");
    // A full window after readiness the sample counts: (100 + 20) / 2 = 60 % -> ceil(2.4).
    let pods = vec![old_ready("a"), pod("b", 90, Some(40))];
    assert_eq!(calc(&obs(2, pods, &[("a", 100), ("b", 20)])), 3);
    // For memory the readiness rules do not apply.
    let pods = vec![old_ready("a"), pod("b", 60, Some(10))];
    let o = Observation {
        spec_replicas: 2,
        pods,
        metrics: BTreeMap::from([("memory".into(), metrics(&[("a", 100), ("b", 20)]))]),
        ..Default::default()
    };
    let p = resource_replicas(2, 50, "memory", &o, S(NOW), &HpaTuning::default()).unwrap();
    assert_eq!(p.replicas, 3);
}

#[test]
fn pod_unready_after_initialization_period_should_still_count_if_it_was_ready_once() {
    // Started 400 s ago, turned Ready=False 10 s ago: its last transition is long after
    // start + 30 s, so Kubernetes keeps its sample.
    let mut b = pod("b", 400, None);
    b.ready = Some(ReadyCondition {
        status: ConditionStatus::False,
        last_transition: S(NOW - 10),
    });
    let o = obs(2, vec![old_ready("a"), b], &[("a", 100), ("b", 100)]);
    assert_eq!(calc(&o), 4);
}

#[test]
fn deleting_and_failed_pods_should_be_ignored() {
    let mut pods: Vec<PodInfo> = (0..4).map(|i| old_ready(&format!("p{i}"))).collect();
    pods[2].deleting = true;
    pods[3].phase = PodPhase::Failed;
    let o = obs(4, pods, &[("p0", 100), ("p1", 100), ("p2", 0), ("p3", 0)]);
    assert_eq!(
        calc(&o),
        4,
        "ceil(2 * 2); the ignored pods' zeros do not dilute"
    );
}

#[test]
fn errors_should_be_reported_not_panicked() {
    let o = Observation {
        spec_replicas: 2,
        ..Default::default()
    };
    let t = HpaTuning::default();
    assert!(matches!(
        resource_replicas(2, 50, "cpu", &o, S(NOW), &t),
        Err(MetricError::Unavailable(_))
    ));
    let o = obs(2, vec![pod("u", 10, None)], &[("u", 100)]);
    assert_eq!(
        resource_replicas(2, 50, "cpu", &o, S(NOW), &t),
        Err(MetricError::NoReadyMetrics)
    );
    let mut p = old_ready("a");
    p.requests.clear();
    let o = obs(2, vec![p], &[("a", 100)]);
    assert!(matches!(
        resource_replicas(2, 50, "cpu", &o, S(NOW), &t),
        Err(MetricError::MissingRequest(_))
    ));
}

fn hpa(spec: HpaSpec) -> HpaRecommender {
    HpaRecommender::new(spec, HpaTuning::default()).unwrap()
}

fn reason(r: &Recommendation, kind: ConditionType) -> (&'static str, bool) {
    let c = r.condition(kind).unwrap();
    (c.reason, c.status)
}

#[test]
fn largest_metric_proposal_should_win_and_invalid_metric_should_block_scale_down() {
    let mut spec = HpaSpec::cpu(1, 100, 50);
    spec.metrics.push(
        ResourceTarget {
            resource: "memory".into(),
            average_utilization: 50,
        }
        .into(),
    );
    let (pods, m) = ready_pods(4, 100);
    let mut o = obs(4, pods, &as_refs(&m));
    o.metrics.insert(
        "memory".into(),
        metrics(&[("p0", 150), ("p1", 150), ("p2", 150), ("p3", 150)]),
    );
    let r = hpa(spec.clone()).recommend(S(NOW), &o);
    assert_eq!(r.proposal, Some(12), "memory asks for 12, cpu for 8");
    let active = r.condition(ConditionType::ScalingActive).unwrap();
    assert!(
        active.message.contains("from memory resource utilization"),
        "{active:?}"
    );
    // Memory unavailable, cpu wants to scale down: no action.
    let (pods, m) = ready_pods(4, 10);
    let o = obs(4, pods.clone(), &as_refs(&m));
    let r = hpa(spec.clone()).recommend(S(NOW), &o);
    assert_eq!(r.replicas, 4);
    assert_eq!(
        reason(&r, ConditionType::ScalingActive),
        ("FailedGetResourceMetric", false)
    );
    // Memory unavailable, cpu wants to scale up: act on cpu.
    let (_, m) = ready_pods(4, 100);
    let r = hpa(spec).recommend(S(NOW), &obs(4, pods, &as_refs(&m)));
    assert_eq!(r.replicas, 8);
    assert_eq!(
        reason(&r, ConditionType::ScalingActive),
        ("ValidMetricFound", true)
    );
}

#[test]
fn scale_down_should_wait_for_the_stabilization_window() {
    let mut h = hpa(HpaSpec::cpu(1, 100, 50));
    let (pods, m) = ready_pods(10, 50);
    let r = h.recommend(S(0), &obs(10, pods.clone(), &as_refs(&m)));
    assert_eq!(r.replicas, 10);
    let (_, low) = ready_pods(10, 25);
    for t in (15..300).step_by(15) {
        let r = h.recommend(S(t), &obs(10, pods.clone(), &as_refs(&low)));
        assert_eq!(r.replicas, 10, "t={t}");
        assert_eq!(
            reason(&r, ConditionType::AbleToScale),
            ("ScaleDownStabilized", true)
        );
    }
    // The recommendation of t=0 is exactly 300 s old and no longer counts.
    let r = h.recommend(S(300), &obs(10, pods, &as_refs(&low)));
    assert_eq!(r.replicas, 5);
    assert_eq!(
        reason(&r, ConditionType::AbleToScale),
        ("ReadyForNewScale", true)
    );
}

#[test]
fn scale_up_should_follow_default_policies() {
    let mut h = hpa(HpaSpec::cpu(1, 100, 50));
    let (pods, m) = ready_pods(2, 100);
    let o = obs(2, pods, &as_refs(&m));
    // Proposal 4 (ratio 2), allowed max(2*2, 2+4) = 6: not limited.
    let r = h.recommend(S(0), &o);
    assert_eq!(r.replicas, 4);
    assert_eq!(
        reason(&r, ConditionType::ScalingLimited),
        ("DesiredWithinRange", false)
    );
    // From 3 pods at 100 %... with a big ratio use memory-like numbers: 3 pods at 500 %.
    let mut h = hpa(HpaSpec::cpu(1, 100, 10));
    let (pods, m) = ready_pods(3, 100);
    let r = h.recommend(S(0), &obs(3, pods.clone(), &as_refs(&m)));
    assert_eq!(r.proposal, Some(30));
    assert_eq!(r.replicas, 7, "max(3 * 2, 3 + 4)");
    assert_eq!(
        reason(&r, ConditionType::ScalingLimited),
        ("ScaleUpLimit", true)
    );
    h.record_scale(S(0), 3, 7);
    // 10 s later the period still holds the +4: start = 3, limit 7 = current: no change.
    let mut pods7 = pods.clone();
    pods7.extend((3..7).map(|i| old_ready(&format!("p{i}"))));
    let m7: Vec<(String, i64)> = (0..7).map(|i| (format!("p{i}"), 100)).collect();
    let r = h.recommend(S(10), &obs(7, pods7.clone(), &as_refs(&m7)));
    assert_eq!(r.replicas, 7);
    // 15 s after the event it has left the period: 7 -> max(14, 11).
    let r = h.recommend(S(15), &obs(7, pods7, &as_refs(&m7)));
    assert_eq!(r.replicas, 14);
}

#[test]
fn select_policy_min_and_disabled_should_bound_the_change() {
    let mut spec = HpaSpec::cpu(1, 100, 10);
    spec.behavior.scale_up.select_policy = SelectPolicy::Min;
    let (pods, m) = ready_pods(10, 100);
    let r = hpa(spec.clone()).recommend(S(0), &obs(10, pods.clone(), &as_refs(&m)));
    assert_eq!(r.replicas, 14, "min(20, 14)");
    spec.behavior.scale_up.select_policy = SelectPolicy::Disabled;
    let r = hpa(spec).recommend(S(0), &obs(10, pods, &as_refs(&m)));
    assert_eq!(r.replicas, 10);
}

#[test]
fn scale_down_policies_and_min_replicas_should_bound_the_change() {
    let mut spec = HpaSpec::cpu(2, 100, 50);
    spec.behavior.scale_down.stabilization_window = Duration::ZERO;
    let (pods, m) = ready_pods(10, 1);
    let r = hpa(spec.clone()).recommend(S(0), &obs(10, pods.clone(), &as_refs(&m)));
    // Proposal ceil(0.02 * 10) = 1 is below min: limited to 2, and the condition says so.
    assert_eq!(r.replicas, 2);
    assert_eq!(
        reason(&r, ConditionType::ScalingLimited),
        ("TooFewReplicas", true)
    );
    spec.behavior.scale_down.policies = vec![ScalingPolicy {
        kind: PolicyKind::Pods,
        value: 1,
        period: Duration::from_secs(60),
    }];
    let mut h = hpa(spec);
    let r = h.recommend(S(0), &obs(10, pods.clone(), &as_refs(&m)));
    assert_eq!(r.replicas, 9);
    assert_eq!(
        reason(&r, ConditionType::ScalingLimited),
        ("ScaleDownLimit", true)
    );
    h.record_scale(S(0), 10, 9);
    let r = h.recommend(S(30), &obs(9, pods[..9].to_vec(), &as_refs(&m[..9])));
    assert_eq!(r.replicas, 9, "one pod per minute");
}

#[test]
fn out_of_bounds_and_zero_replicas_should_be_handled_before_metrics() {
    let mut h = hpa(HpaSpec::cpu(2, 5, 50));
    let (pods, m) = ready_pods(8, 10);
    let r = h.recommend(S(0), &obs(8, pods, &as_refs(&m)));
    assert_eq!(r.replicas, 5);
    let r = h.recommend(S(0), &obs(1, vec![], &[]));
    assert_eq!(r.replicas, 2);
    let r = h.recommend(S(0), &obs(0, vec![], &[]));
    assert_eq!(r.replicas, 0);
    assert_eq!(
        reason(&r, ConditionType::ScalingActive),
        ("ScalingDisabled", false)
    );
}

#[test]
fn invalid_spec_should_be_refused() {
    assert!(HpaRecommender::new(HpaSpec::cpu(3, 2, 50), HpaTuning::default()).is_err());
    assert!(HpaRecommender::new(HpaSpec::cpu(1, 2, 0), HpaTuning::default()).is_err());
}

/// Cases with the numbers of kube-controller-manager's own replica calculator tests (CPU
/// requests of 1 core; `None` readiness is Ready=False within the initialisation period).
#[test]
fn kubernetes_reference_cases_should_give_the_same_counts() {
    // (current, readiness per pod, usage % per pod, target %, expected replicas, utilisation)
    type Case = (i32, &'static [bool], &'static [i64], i32, i32, i32);
    let cases: [Case; 4] = [
        (3, &[false, true, true], &[30, 50, 70], 30, 4, 60),
        (3, &[true, false, false], &[40, 50, 70], 30, 3, 40),
        (
            5,
            &[true, true, true, false, false],
            &[10, 30, 50, 25, 25],
            50,
            2,
            30,
        ),
        (3, &[true, true, true], &[30, 50, 70], 30, 5, 50),
    ];
    for (current, ready, usage, target, expected, utilization) in cases {
        let pods: Vec<PodInfo> = ready
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if *r {
                    old_ready(&format!("p{i}"))
                } else {
                    pod(&format!("p{i}"), 20, None)
                }
            })
            .collect();
        let m: Vec<(String, i64)> = usage
            .iter()
            .enumerate()
            .map(|(i, u)| (format!("p{i}"), *u))
            .collect();
        let o = obs(current, pods, &as_refs(&m));
        let p =
            resource_replicas(current, target, "cpu", &o, S(NOW), &HpaTuning::default()).unwrap();
        assert_eq!(
            (p.replicas, p.utilization),
            (expected, Some(utilization)),
            "{usage:?}"
        );
    }
}
