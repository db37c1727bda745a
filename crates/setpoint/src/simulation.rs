//! `setpoint simulate autoscaling`: runs the Kubernetes HPA recommender and the PID autoscaler
//! against the deterministic plant of `setpoint-control` for each scenario, prints the
//! measures, and writes `DIR/<scenario>.svg` plus `DIR/results.md`.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use setpoint_control::sim::{compare, plot, table, Targets};

use crate::cli::{SimulateAutoscalingArgs, SimulateCommand};

/// Runs one `setpoint simulate` subcommand.
pub(crate) fn simulate(command: SimulateCommand) -> Result<()> {
    match command {
        SimulateCommand::Autoscaling(args) => autoscaling(&args),
    }
}

fn autoscaling(args: &SimulateAutoscalingArgs) -> Result<()> {
    let targets = Targets::default();
    let results = compare(args.seed, &targets).context("running the simulation")?;
    let mut report = String::new();
    let _ = writeln!(
        report,
        "seed {}; target {} % CPU, min {} / max {} replicas, sync every {} s, pods ready {} s after creation\n",
        args.seed,
        targets.utilization,
        targets.min_replicas,
        targets.max_replicas,
        targets.sync_period.as_secs(),
        results
            .first()
            .map_or(0, |(s, _)| s.plant.start_delay.as_secs()),
    );
    report.push_str(&table(&results));
    print!("{report}");
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for (scenario, runs) in &results {
        let path = args.out.join(format!("{}.svg", scenario.name));
        std::fs::write(&path, plot(scenario, runs, &targets))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    let path = args.out.join("results.md");
    std::fs::write(&path, &report).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}
