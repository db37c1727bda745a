//! `setpoint bench workloads`: whole workloads through every built-in loop, measured the way a
//! user sees them — from `create` to pods observed `Running` and `Ready` through a watch.
//!
//! - [`simulated`]: Deployments of 5,000 and 10,000 replicas on 100 simulated nodes, and a
//!   rolling update of the larger one.
//! - [`processes`]: 200 pods as real processes on a node agent running as its own process, the
//!   agent's CPU and memory while they run, and the first restart of a killed container.
//! - [`daemonsets`]: a DaemonSet over 1,000 simulated nodes, created and rolled.
//! - [`statefulsets`]: a 1,000-replica `Parallel` StatefulSet to all ready.
//! - [`jobs`]: a Job of 10,000 completions, parallelism 500, on simulated nodes.
//!
//! Each benchmark runs its own `setpoint server` child (this executable) on a fresh data
//! directory, killed when the benchmark ends, fails or is interrupted.

mod daemonsets;
mod jobs;
mod pods;
mod processes;
mod simulated;
mod statefulsets;

use anyhow::{bail, Context as _, Result};

use super::machine::Machine;
use super::report::{Report, Row};
use crate::cli::{WorkloadsBench, WorkloadsBenchArgs};

/// Runs `setpoint bench workloads` and prints its results, as text and as markdown.
pub(crate) async fn bench_workloads(args: WorkloadsBenchArgs) -> Result<()> {
    let parent = args.dir.clone().unwrap_or_else(super::default_parent);
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-workloads-")
        .tempdir_in(&parent)
        .with_context(|| format!("creating a temporary directory in {}", parent.display()))?;
    let machine = Machine::describe(root.path());
    eprintln!("benchmarking workloads in {}", root.path().display());
    eprintln!("{machine}");

    let mut rows = Vec::new();
    let mut failed = 0;
    for bench in super::selected(&WorkloadsBench::ALL, &args.only) {
        let dir = root.path().join(format!("{bench:?}").to_lowercase());
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let run = async {
            match bench {
                WorkloadsBench::Simulated => simulated::bench(&dir, args.quick).await,
                WorkloadsBench::Jobs => jobs::bench(&dir, args.quick).await,
                WorkloadsBench::Processes => {
                    processes::bench(&dir, if args.quick { 50 } else { 200 }).await
                }
                WorkloadsBench::DaemonSets => {
                    daemonsets::bench(&dir, if args.quick { 100 } else { 1_000 }).await
                }
                WorkloadsBench::StatefulSets => {
                    statefulsets::bench(&dir, if args.quick { 200 } else { 1_000 }).await
                }
            }
        };
        // Dropping the run on Ctrl-C drops its children, which kills them.
        let result = tokio::select! {
            result = run => result,
            interrupted = tokio::signal::ctrl_c() => {
                interrupted.context("waiting for Ctrl-C")?;
                bail!("interrupted");
            }
        };
        match result {
            Ok(more) => rows.extend(more),
            Err(error) => {
                eprintln!("[{bench:?}] FAILED: {error:#}");
                let first_line = format!("{error:#}").lines().next().unwrap_or("").to_owned();
                rows.push(Row::new(
                    format!("{bench:?}").to_lowercase(),
                    format!("FAILED: {first_line}"),
                ));
                failed += 1;
            }
        }
    }
    root.close()
        .context("deleting the benchmark's data directory")?;
    let report = Report {
        title: format!(
            "setpoint bench workloads{} (setpoint {})",
            if args.quick { " --quick" } else { "" },
            env!("CARGO_PKG_VERSION")
        ),
        machine,
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    if failed > 0 {
        bail!("{failed} workload benchmark(s) failed");
    }
    Ok(())
}
