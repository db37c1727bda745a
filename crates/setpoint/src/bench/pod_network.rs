//! `setpoint bench pod-network`: the time to set up and tear down one pod's network
//! (network namespace pinned by a helper process, veth pair on the bridge, address, routes)
//! for N pods in a row, on a scratch bridge and range of its own. Needs root.

use anyhow::{Context, Result};

use super::latency::Latencies;
use super::machine::Machine;
use super::report::{Report, Row};
use crate::cli::PodNetworkBenchArgs;

/// The goal per pod (issue 18).
const SETUP_TARGET: std::time::Duration = std::time::Duration::from_millis(20);

/// Runs the benchmark and prints its report.
pub(crate) fn bench_pod_network(args: &PodNetworkBenchArgs) -> Result<()> {
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-podnet-")
        .tempdir_in(super::default_parent())
        .context("creating a scratch directory")?;
    let root_dir = std::fs::canonicalize(root.path()).context("the scratch directory")?;
    let machine = Machine::describe(&root_dir);
    let shim = crate::agent::shim_command()?;
    let pods = usize::from(args.pods);
    let times = setpoint_agent::bench_pod_network(&root_dir, args.pod_cidr, pods, shim)
        .map_err(|e| anyhow::anyhow!("pod network benchmark: {e}"))?;
    let summarize = |all: &[std::time::Duration]| {
        let mut latencies = Latencies::new();
        for t in all {
            latencies.record(*t);
        }
        latencies.summary()
    };
    let setup = summarize(&times.setup);
    let teardown = summarize(&times.teardown);
    let total: std::time::Duration = times.setup.iter().sum();
    let mean = total / u32::try_from(times.setup.len().max(1)).unwrap_or(1);
    let report = Report {
        title: format!(
            "setpoint bench pod-network --pods {pods} (setpoint {})",
            env!("CARGO_PKG_VERSION")
        ),
        machine,
        rows: vec![
            Row::new(
                format!("pod network setup, {pods} pods"),
                format!("{:.1} ms/pod mean", mean.as_secs_f64() * 1000.0),
            )
            .latency(setup)
            .target("p50 ≤ 20 ms", setup.p50 <= SETUP_TARGET),
            Row::new(
                format!("pod network teardown, {pods} pods"),
                format!(
                    "{:.1} ms/pod mean",
                    times
                        .teardown
                        .iter()
                        .sum::<std::time::Duration>()
                        .as_secs_f64()
                        * 1000.0
                        / pods.max(1) as f64
                ),
            )
            .latency(teardown),
        ],
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    Ok(())
}
