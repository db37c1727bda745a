//! PID autoscaler cases: log space, the freeze while pods start, resynchronisation, the HPA as
//! its pure-integral special case, deadband and anti-windup.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::hpa::resource_replicas;
use crate::observe::{ConditionStatus, PodInfo, PodMetric, PodPhase, ReadyCondition};

const S: fn(u64) -> Duration = Duration::from_secs;

/// `n` pods of which the first `ready` are ready (for an hour) at `pct` % CPU.
fn obs(current: i32, n: usize, ready: usize, pct: i64, now: u64) -> Observation {
    let mut pods = Vec::new();
    let mut cpu = BTreeMap::new();
    for i in 0..n {
        let is_ready = i < ready;
        pods.push(PodInfo {
            name: format!("p{i}"),
            phase: PodPhase::Running,
            deleting: false,
            start_time: Some(if is_ready { S(0) } else { S(now - 5) }),
            ready: Some(ReadyCondition {
                status: if is_ready {
                    ConditionStatus::True
                } else {
                    ConditionStatus::False
                },
                last_transition: if is_ready { S(1) } else { S(now - 5) },
            }),
            requests: BTreeMap::from([("cpu".into(), 1000)]),
        });
        if is_ready {
            cpu.insert(
                format!("p{i}"),
                PodMetric {
                    value_milli: pct * 10,
                    timestamp: S(now),
                    window: S(30),
                },
            );
        }
    }
    Observation {
        spec_replicas: current,
        status_replicas: current,
        pods,
        metrics: BTreeMap::from([("cpu".into(), cpu)]),
        values: BTreeMap::new(),
    }
}

const T0: u64 = 4000;

#[test]
fn log_space_should_make_up_and_down_symmetric() {
    let cfg = PidAutoscalerConfig {
        kp: 0.0,
        ki: 1.0,
        kd: 0.0,
        deadband: 0.0,
        ..PidAutoscalerConfig::cpu(1, 100, 50)
    };
    let mut pid = PidAutoscaler::new(cfg.clone()).unwrap();
    // 75 % on a 50 % target is a ratio of 1.5: 10 -> 15; then 33 % (ratio 0.66): 15 -> 10.
    assert_eq!(pid.recommend(S(T0), &obs(10, 10, 10, 75, T0)).replicas, 15);
    let r = pid.recommend(S(T0 + 15), &obs(15, 15, 15, 33, T0 + 15));
    assert_eq!(r.replicas, 10);
    // The same ratio at four times the scale moves four times as many pods.
    let mut pid = PidAutoscaler::new(cfg).unwrap();
    let r = pid.recommend(S(T0), &obs(40, 40, 40, 75, T0));
    assert_eq!(r.replicas, 60);
}

#[test]
fn upward_integration_should_freeze_while_pods_start() {
    let cfg = PidAutoscalerConfig::cpu(1, 100, 50);
    let mut frozen = PidAutoscaler::new(cfg.clone()).unwrap();
    let mut free = PidAutoscaler::new(PidAutoscalerConfig {
        freeze_while_starting: false,
        ..cfg
    })
    .unwrap();
    let mut i_frozen = Vec::new();
    let (mut a, mut b) = (20, 20);
    for k in 0..4 {
        let now = T0 + 15 * k;
        // Ten pods ready and saturated, the rest starting.
        let r = frozen.recommend(S(now), &obs(a, a as usize, 10, 100, now));
        i_frozen.push(r.terms.unwrap().i);
        frozen.record_scale(S(now), a, r.replicas);
        a = r.replicas;
        let r = free.recommend(S(now), &obs(b, b as usize, 10, 100, now));
        free.record_scale(S(now), b, r.replicas);
        b = r.replicas;
    }
    assert!(
        i_frozen.windows(2).all(|w| w[1] <= w[0] + 1e-12),
        "integral rose: {i_frozen:?}"
    );
    let i_free = free.pid.terms().i;
    assert!(i_free > i_frozen[3] + 0.5, "{i_free} vs {i_frozen:?}");
}

#[test]
fn external_scale_should_resynchronise_without_a_bump() {
    let mut pid = PidAutoscaler::new(PidAutoscalerConfig::cpu(1, 100, 50)).unwrap();
    assert_eq!(pid.recommend(S(T0), &obs(10, 10, 10, 50, T0)).replicas, 10);
    // Someone scales to 30; the load is on target: stay at 30, do not pull back to 10.
    let r = pid.recommend(S(T0 + 15), &obs(30, 30, 30, 50, T0 + 15));
    assert_eq!(r.replicas, 30);
    let t = r.terms.unwrap();
    assert!((t.i - 30f64.ln()).abs() < 1e-9, "{t:?}");
}

#[test]
fn hpa_should_be_the_pure_integral_special_case() {
    let tuning = HpaTuning {
        tolerance: 0.0,
        ..HpaTuning::default()
    };
    let cfg = PidAutoscalerConfig {
        tuning,
        ..PidAutoscalerConfig::hpa_equivalent(1, 100, 50)
    };
    // Single samples over a grid.
    for current in [2, 3, 7, 10, 16] {
        for pct in [20, 35, 45, 58, 61, 77, 90, 100] {
            let o = obs(current, current as usize, current as usize, pct, T0);
            let hpa = resource_replicas(current, 50, "cpu", &o, S(T0), &tuning).unwrap();
            let mut pid = PidAutoscaler::new(cfg.clone()).unwrap();
            let r = pid.recommend(S(T0), &o);
            assert_eq!(
                r.proposal,
                Some(hpa.replicas),
                "current {current} at {pct} %"
            );
        }
    }
    // A sequence, the PID keeping its state between samples.
    let mut pid = PidAutoscaler::new(cfg).unwrap();
    let mut current = 4;
    for (k, pct) in [90, 80, 60, 40, 30, 55, 70, 45].into_iter().enumerate() {
        let now = T0 + 15 * k as u64;
        let o = obs(current, current as usize, current as usize, pct, now);
        let hpa = resource_replicas(current, 50, "cpu", &o, S(now), &tuning).unwrap();
        let r = pid.recommend(S(now), &o);
        assert_eq!(r.proposal, Some(hpa.replicas), "step {k}");
        pid.record_scale(S(now), current, r.replicas);
        current = r.replicas;
    }
}

#[test]
fn deadband_should_hold_small_errors() {
    let mut pid = PidAutoscaler::new(PidAutoscalerConfig::cpu(1, 100, 50)).unwrap();
    for k in 0..40 {
        let now = T0 + 15 * k;
        // 51 % on 50 %: ln(1.02) < 0.03.
        assert_eq!(
            pid.recommend(S(now), &obs(20, 20, 20, 51, now)).replicas,
            20
        );
    }
}

#[test]
fn rate_limit_should_rebase_the_integral() {
    let cfg = PidAutoscalerConfig {
        kp: 0.0,
        ki: 3.0,
        ..PidAutoscalerConfig::cpu(1, 100, 50)
    };
    let mut pid = PidAutoscaler::new(cfg).unwrap();
    let r = pid.recommend(S(T0), &obs(2, 2, 2, 100, T0));
    // Proposal 2 * 2^3 = 16, the policies allow max(4, 6) = 6.
    assert_eq!(r.proposal, Some(16));
    assert_eq!(r.replicas, 6);
    let t = r.terms.unwrap();
    assert!((t.p + t.i + t.d - 6f64.ln()).abs() < 1e-9, "{t:?}");
    assert_eq!(
        r.condition(ConditionType::ScalingLimited).unwrap().reason,
        "ScaleUpLimit"
    );
}

#[test]
fn terms_should_sum_to_the_output() {
    let mut pid = PidAutoscaler::new(PidAutoscalerConfig {
        kd: 1.0,
        ..PidAutoscalerConfig::cpu(1, 100, 50)
    })
    .unwrap();
    pid.recommend(S(T0), &obs(10, 10, 10, 50, T0));
    let r = pid.recommend(S(T0 + 15), &obs(10, 10, 10, 70, T0 + 15));
    let t = r.terms.unwrap();
    assert!(t.p > 0.0 && t.d > 0.0, "{t:?}");
    assert!((t.p + t.i + t.d - t.output).abs() < 1e-12);
}

#[test]
fn predicted_ratio_should_count_starting_pods_as_capacity() {
    let cfg = PidAutoscalerConfig {
        freeze_while_starting: false,
        ..PidAutoscalerConfig::cpu(1, 100, 50)
    };
    let predicting = PidAutoscalerConfig {
        predict_pending: true,
        ..cfg.clone()
    };
    // 20 asked for, 10 ready at 100 %: the ready pods see twice the target, but once the
    // other 10 serve, utilisation will be on target.
    let o = obs(20, 20, 10, 100, T0);
    assert_eq!(
        PidAutoscaler::new(predicting)
            .unwrap()
            .recommend(S(T0), &o)
            .replicas,
        20
    );
    assert!(
        PidAutoscaler::new(cfg)
            .unwrap()
            .recommend(S(T0), &o)
            .replicas
            > 20
    );
}

#[test]
fn fresh_metrics_gate_should_hold_until_a_window_follows_the_capacity_change() {
    let cfg = PidAutoscalerConfig {
        fresh_metrics_only: true,
        ..PidAutoscalerConfig::cpu(1, 100, 50)
    };
    let mut gated = PidAutoscaler::new(cfg.clone()).unwrap();
    let mut ungated = PidAutoscaler::new(PidAutoscalerConfig {
        fresh_metrics_only: false,
        ..cfg
    })
    .unwrap();
    let first = obs(10, 10, 10, 50, T0);
    assert_eq!(gated.recommend(S(T0), &first).replicas, 10);
    assert_eq!(ungated.recommend(S(T0), &first).replicas, 10);
    // A pod turned ready 5 s ago; the newest window (30 s) began before that.
    let now = T0 + 15;
    let mut o = obs(10, 10, 10, 90, now);
    o.pods[9].ready = Some(ReadyCondition {
        status: ConditionStatus::True,
        last_transition: S(now - 5),
    });
    assert_eq!(gated.recommend(S(now), &o).replicas, 10, "held");
    assert!(ungated.recommend(S(now), &o).replicas > 10);
}
