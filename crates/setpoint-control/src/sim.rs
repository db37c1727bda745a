//! The autoscaling simulation: recommenders driven against the [`Plant`] through three load
//! scenarios, measured and plotted. Deterministic: the same seed gives the same numbers.
//!
//! A run steps the plant tick by tick; every `sync_period` (15 s, first at `sync_offset` 5 s,
//! so syncs read a scrape that is 5 s old, as an unsynchronised HPA would on average) the
//! recommender gets [`Plant::observe`] and its answer is applied at once.
//!
//! Measures, all taken from the load step on (see `docs/control.md`):
//! - **final**: the median of spec replicas over the last 300 s of the run;
//! - **overshoot %**: for a step up, `(max replicas − final) / final × 100`; for a step down,
//!   `(final − min replicas) / final × 100` (the excursion past the final value, never < 0);
//! - **settling s**: time from the step until replicas enter `final ± 5 %` (at least ± 0.5, so
//!   exact at small counts) and stay there to the end;
//! - **direction changes**: sign changes between consecutive replica changes;
//! - **steady-state error**: `|mean utilisation over the last 300 s − target|`, in percentage
//!   points of CPU utilisation;
//! - **backlog·s**: `∫ backlog dt` (request-seconds of queueing); **pod·s**: `∫ pods dt`.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::error::Result;
use crate::hpa::{HpaRecommender, HpaSpec, HpaTuning};
use crate::observe::Recommender;
use crate::pid_autoscaler::{PidAutoscaler, PidAutoscalerConfig};
use crate::plant::{LoadStep, Plant, PlantConfig, TracePoint};
use crate::svg::{grid, Panel, Series};

/// The autoscaler settings both controllers share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Targets {
    /// Target CPU utilisation, percent.
    pub utilization: i32,
    /// `minReplicas`.
    pub min_replicas: i32,
    /// `maxReplicas`.
    pub max_replicas: i32,
    /// Between syncs.
    pub sync_period: Duration,
    /// First sync.
    pub sync_offset: Duration,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            utilization: 50,
            min_replicas: 2,
            max_replicas: 100,
            sync_period: Duration::from_secs(15),
            sync_offset: Duration::from_secs(5),
        }
    }
}

/// A load scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// Short name, used for file names.
    pub name: &'static str,
    /// One-line description.
    pub title: &'static str,
    /// The plant, seed included.
    pub plant: PlantConfig,
    /// When the load steps.
    pub step_at: Duration,
    /// Run length.
    pub duration: Duration,
}

/// The three scenarios: 4× up, 4× down, and +8 % (inside the HPA's 10 % tolerance).
pub fn scenarios(seed: u64) -> Vec<Scenario> {
    let step_at = Duration::from_secs(300);
    let duration = Duration::from_secs(1800);
    let scenario = |name, title, base_load, initial_replicas, factor| Scenario {
        name,
        title,
        plant: PlantConfig {
            base_load,
            initial_replicas,
            steps: vec![LoadStep {
                at: step_at,
                factor,
            }],
            seed,
            ..PlantConfig::default()
        },
        step_at,
        duration,
    };
    vec![
        scenario("step-up", "4x load step up (25 -> 100 req/s)", 25.0, 5, 4.0),
        scenario(
            "step-down",
            "4x load step down (100 -> 25 req/s)",
            100.0,
            20,
            0.25,
        ),
        scenario(
            "small-step",
            "+8 % load step, inside the HPA's tolerance (100 -> 108 req/s)",
            100.0,
            20,
            1.08,
        ),
    ]
}

/// The measures of one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measures {
    /// Median replicas over the last 300 s.
    pub final_replicas: f64,
    /// Excursion past the final value, percent of it.
    pub overshoot_pct: f64,
    /// Seconds from the step to staying within ±5 % of final.
    pub settling_s: f64,
    /// Sign changes of the replica count's movement.
    pub direction_changes: u32,
    /// |mean utilisation − target| over the last 300 s, percentage points.
    pub steady_error_pts: f64,
    /// ∫ backlog dt, request-seconds.
    pub backlog_s: f64,
    /// ∫ pods dt.
    pub pod_s: f64,
}

/// One controller on one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// The recommender's name.
    pub controller: String,
    /// Every tick.
    pub trace: Vec<TracePoint>,
    /// What was measured.
    pub measures: Measures,
}

/// Runs `rec` on `scenario`.
pub fn run(scenario: &Scenario, targets: &Targets, rec: &mut dyn Recommender) -> Result<Run> {
    let mut plant = Plant::new(scenario.plant.clone())?;
    let period = targets.sync_period.as_millis().max(1);
    let offset = targets.sync_offset.as_millis() % period;
    while plant.now() < scenario.duration {
        plant.step();
        let now = plant.now();
        if now.as_millis() % period == offset {
            let obs = plant.observe();
            let r = rec.recommend(now, &obs);
            if r.replicas != obs.spec_replicas {
                plant.set_replicas(r.replicas);
                rec.record_scale(now, obs.spec_replicas, r.replicas);
            }
        }
    }
    let trace = plant.trace().to_vec();
    let measures = measure(&trace, scenario, targets);
    Ok(Run {
        controller: rec.name().to_string(),
        trace,
        measures,
    })
}

/// Computes [`Measures`] from a trace.
pub fn measure(trace: &[TracePoint], scenario: &Scenario, targets: &Targets) -> Measures {
    let step = scenario.step_at.as_secs_f64();
    let end = trace.last().map_or(0.0, |p| p.t);
    let dt = scenario.plant.tick.as_secs_f64();
    let after: Vec<&TracePoint> = trace.iter().filter(|p| p.t > step).collect();
    let tail: Vec<&TracePoint> = trace.iter().filter(|p| p.t > end - 300.0).collect();
    let mut last: Vec<i32> = tail.iter().map(|p| p.replicas).collect();
    last.sort_unstable();
    let final_replicas = last.get(last.len() / 2).copied().map_or(0.0, f64::from);
    let up = scenario.plant.steps.first().is_none_or(|s| s.factor >= 1.0);
    let overshoot_pct = if final_replicas <= 0.0 {
        0.0
    } else if up {
        let max = after
            .iter()
            .map(|p| p.replicas)
            .max()
            .map_or(0.0, f64::from);
        ((max - final_replicas) / final_replicas * 100.0).max(0.0)
    } else {
        let min = after
            .iter()
            .map(|p| p.replicas)
            .min()
            .map_or(0.0, f64::from);
        ((final_replicas - min) / final_replicas * 100.0).max(0.0)
    };
    let band = (0.05 * final_replicas).max(0.5);
    let settled_from = after
        .iter()
        .rev()
        .find(|p| (f64::from(p.replicas) - final_replicas).abs() > band)
        .map_or(step, |p| p.t);
    let mut direction_changes = 0;
    let mut last_dir = 0i32;
    for w in after.windows(2) {
        let d = (w[1].replicas - w[0].replicas).signum();
        if d != 0 {
            if last_dir != 0 && d != last_dir {
                direction_changes += 1;
            }
            last_dir = d;
        }
    }
    let mean_util = tail.iter().map(|p| p.utilization).sum::<f64>() / tail.len().max(1) as f64;
    Measures {
        final_replicas,
        overshoot_pct,
        settling_s: settled_from - step,
        direction_changes,
        steady_error_pts: (mean_util * 100.0 - f64::from(targets.utilization)).abs(),
        backlog_s: after.iter().map(|p| p.backlog * dt).sum(),
        pod_s: after.iter().map(|p| f64::from(p.replicas) * dt).sum(),
    }
}

/// The HPA with Kubernetes' defaults for `targets`.
pub fn default_hpa(targets: &Targets) -> Result<HpaRecommender> {
    HpaRecommender::new(
        HpaSpec::cpu(
            targets.min_replicas,
            targets.max_replicas,
            targets.utilization,
        ),
        HpaTuning::default(),
    )
}

/// The PID law with its tuned defaults for `targets`.
pub fn default_pid(targets: &Targets) -> Result<PidAutoscaler> {
    let mut cfg = PidAutoscalerConfig::cpu(
        targets.min_replicas,
        targets.max_replicas,
        targets.utilization,
    );
    cfg.period = targets.sync_period;
    PidAutoscaler::new(cfg)
}

/// Every scenario with the default HPA and the default PID.
pub fn compare(seed: u64, targets: &Targets) -> Result<Vec<(Scenario, Vec<Run>)>> {
    scenarios(seed)
        .into_iter()
        .map(|s| {
            let hpa = run(&s, targets, &mut default_hpa(targets)?)?;
            let pid = run(&s, targets, &mut default_pid(targets)?)?;
            Ok((s, vec![hpa, pid]))
        })
        .collect()
}

/// A Markdown table of the measures.
pub fn table(results: &[(Scenario, Vec<Run>)]) -> String {
    let mut out = String::from(
        "| scenario | controller | final | overshoot % | settling s | direction changes | steady error pts | backlog·s | pod·s |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (s, runs) in results {
        for r in runs {
            let m = r.measures;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} | {:.0} | {} | {:.1} | {:.0} | {:.0} |",
                s.name,
                r.controller,
                m.final_replicas,
                m.overshoot_pct,
                m.settling_s,
                m.direction_changes,
                m.steady_error_pts,
                m.backlog_s,
                m.pod_s
            );
        }
    }
    out
}

/// An SVG of one scenario: rows pods / utilisation / backlog, one column per controller.
pub fn plot(scenario: &Scenario, runs: &[Run], targets: &Targets) -> String {
    let every = |r: &Run, f: &dyn Fn(&TracePoint) -> f64| -> Vec<(f64, f64)> {
        r.trace
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 5 == 0)
            .map(|(_, p)| (p.t, f(p)))
            .collect()
    };
    let max_pods = runs
        .iter()
        .flat_map(|r| r.trace.iter().map(|p| p.replicas))
        .max()
        .unwrap_or(1);
    let max_backlog = runs
        .iter()
        .flat_map(|r| r.trace.iter().map(|p| p.backlog))
        .fold(1.0, f64::max);
    let target = f64::from(targets.utilization);
    let mut rows = vec![Vec::new(), Vec::new(), Vec::new()];
    for r in runs {
        let name = r.controller.to_uppercase();
        rows[0].push(Panel {
            title: format!("{name}: pods"),
            y_label: "pods".into(),
            y_max: f64::from(max_pods) * 1.1,
            series: vec![
                series(
                    "replicas",
                    "#1f77b4",
                    false,
                    every(r, &|p| f64::from(p.replicas)),
                ),
                series("ready", "#ff7f0e", true, every(r, &|p| f64::from(p.ready))),
            ],
        });
        rows[1].push(Panel {
            title: format!("{name}: CPU utilisation of ready pods"),
            y_label: "% of request".into(),
            y_max: 100.0,
            series: vec![
                series(
                    "utilisation",
                    "#2ca02c",
                    false,
                    every(r, &|p| p.utilization * 100.0),
                ),
                series(
                    "target",
                    "#7f7f7f",
                    true,
                    vec![(0.0, target), (scenario.duration.as_secs_f64(), target)],
                ),
            ],
        });
        rows[2].push(Panel {
            title: format!("{name}: backlog"),
            y_label: "requests".into(),
            y_max: max_backlog * 1.1,
            series: vec![series(
                "backlog",
                "#d62728",
                false,
                every(r, &|p| p.backlog),
            )],
        });
    }
    grid(
        &format!("{} — seed {}", scenario.title, scenario.plant.seed),
        "seconds",
        scenario.duration.as_secs_f64(),
        &rows,
    )
}

fn series(label: &str, color: &'static str, dashed: bool, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.into(),
        color,
        dashed,
        points,
    }
}
