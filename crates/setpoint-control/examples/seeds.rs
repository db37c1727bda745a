//! The simulation over many seeds: `cargo run --release -p setpoint-control --example seeds
//! [N]`. For each scenario, controller and measure, prints the median and the worst value over
//! seeds 1..=N (default 20), and how many seeds meet each PID target.

use setpoint_control::sim::{compare, Measures, Targets};

fn stats(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (values[0], values[n / 2], values[n - 1])
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let targets = Targets::default();
    let runs: Vec<_> = (1..=n)
        .map(|seed| compare(seed, &targets).expect("simulation runs"))
        .collect();
    let names: Vec<&str> = runs[0].iter().map(|(s, _)| s.name).collect();
    println!("seeds 1..={n}; each cell: min / median / max");
    println!("| scenario | controller | overshoot % | settling s | direction changes | steady error pts | backlog·s | pod·s |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut met = [0u32; 5];
    for (k, name) in names.iter().enumerate() {
        for c in 0..2 {
            let ms: Vec<Measures> = runs.iter().map(|r| r[k].1[c].measures).collect();
            let col = |f: &dyn Fn(&Measures) -> f64| {
                let mut v: Vec<f64> = ms.iter().map(f).collect();
                let (lo, mid, hi) = stats(&mut v);
                format!("{lo:.0} / {mid:.0} / {hi:.0}")
            };
            let err = {
                let mut v: Vec<f64> = ms.iter().map(|m| m.steady_error_pts).collect();
                let (lo, mid, hi) = stats(&mut v);
                format!("{lo:.1} / {mid:.1} / {hi:.1}")
            };
            println!(
                "| {name} | {} | {} | {} | {} | {err} | {} | {} |",
                runs[0][k].1[c].controller,
                col(&|m| m.overshoot_pct),
                col(&|m| m.settling_s),
                col(&|m| f64::from(m.direction_changes)),
                col(&|m| m.backlog_s),
                col(&|m| m.pod_s),
            );
        }
    }
    let mut missed = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let (hpa_up, pid_up) = (r[0].1[0].measures, r[0].1[1].measures);
        let ok = [
            pid_up.overshoot_pct <= 40.0,
            r[1].1[1].measures.settling_s <= 120.0,
            r.iter()
                .all(|(_, runs)| runs[1].measures.direction_changes <= 3),
            r.iter()
                .all(|(_, runs)| runs[1].measures.steady_error_pts <= 2.0),
            pid_up.backlog_s <= 2.5 * hpa_up.backlog_s,
        ];
        for (m, ok) in met.iter_mut().zip(ok) {
            *m += u32::from(ok);
        }
        if ok.contains(&false) {
            missed.push(i + 1);
        }
    }
    println!(
        "\nPID targets met, of {n} seeds: overshoot <= 40 %: {}; step-down settling <= 120 s: {}; <= 3 direction changes: {}; steady error <= 2 pts: {}; backlog <= 2.5x HPA: {}",
        met[0], met[1], met[2], met[3], met[4]
    );
    println!("seeds missing some target: {missed:?}");
}
