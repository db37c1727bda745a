//! Grid search over the PID autoscaler's tuning against the simulation's targets, on several
//! seeds: `cargo run --release -p setpoint-control --example tune_pid [SEEDS]`. Prints the
//! best settings first: fewest missed targets over all seeds, then lowest cost (pod-seconds
//! plus backlog). This is how the defaults in `PidAutoscalerConfig::cpu` were chosen.

use setpoint_control::sim::{default_hpa, run, scenarios, Targets};
use setpoint_control::{PidAutoscaler, PidAutoscalerConfig, Rounding};

fn main() {
    let targets = Targets::default();
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let seeds: Vec<u64> = (1..=n).collect();
    let hpa_backlog: Vec<f64> = seeds
        .iter()
        .map(|&seed| {
            let s = &scenarios(seed)[0];
            let mut hpa = default_hpa(&targets).expect("valid HPA");
            run(s, &targets, &mut hpa).expect("run").measures.backlog_s
        })
        .collect();
    let mut results = Vec::new();
    for kp in [0.15, 0.2, 0.25, 0.3] {
        for ki in [0.3, 0.35, 0.4, 0.45] {
            for kd in [0.0, 0.1, 0.2, 0.4] {
                for deadband in [0.05, 0.065, 0.08] {
                    for hysteresis in [0.2, 0.3, 0.4] {
                        let mut cfg = PidAutoscalerConfig::cpu(2, 100, 50);
                        cfg.kp = kp;
                        cfg.ki = ki;
                        cfg.kd = kd;
                        cfg.deadband = deadband;
                        cfg.rounding = Rounding::Nearest { hysteresis };
                        let mut misses = 0u32;
                        let mut cost = 0.0;
                        let mut worst = [0.0f64; 5];
                        for (i, &seed) in seeds.iter().enumerate() {
                            for (k, s) in scenarios(seed).iter().enumerate() {
                                let mut pid = PidAutoscaler::new(cfg.clone()).expect("valid");
                                let m = run(s, &targets, &mut pid).expect("run").measures;
                                cost += m.pod_s / 1000.0 + m.backlog_s / 20000.0;
                                let backlog = m.backlog_s / hpa_backlog[i];
                                if k == 0 {
                                    misses += u32::from(m.overshoot_pct > 40.0)
                                        + u32::from(backlog > 2.5);
                                    worst[0] = worst[0].max(m.overshoot_pct);
                                    worst[4] = worst[4].max(backlog);
                                }
                                if k == 1 {
                                    misses += u32::from(m.settling_s > 120.0);
                                    worst[1] = worst[1].max(m.settling_s);
                                }
                                misses += u32::from(m.direction_changes > 3)
                                    + u32::from(m.steady_error_pts > 2.0);
                                worst[2] = worst[2].max(f64::from(m.direction_changes));
                                worst[3] = worst[3].max(m.steady_error_pts);
                            }
                        }
                        results.push((
                            misses,
                            cost,
                            format!(
                                "kp {kp} ki {ki} kd {kd} deadband {deadband} hysteresis {hysteresis}: misses {misses}, worst overshoot {:.0} %, step-down settling {:.0} s, direction changes {}, steady error {:.1} pts, backlog x{:.2} of the HPA's, cost {cost:.0}",
                                worst[0], worst[1], worst[2], worst[3], worst[4]
                            ),
                        ));
                    }
                }
            }
        }
    }
    results.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    for (_, _, line) in results.iter().take(15) {
        println!("{line}");
    }
}
