//! The controller SDK's benchmarks (setpoint-runtime), against the issue's targets and
//! against kube-runtime on the same server and workload.
//!
//! ```sh
//! cargo bench -p setpoint --bench sdk                      # every benchmark, 3 runs each
//! cargo bench -p setpoint --bench sdk -- --quick           # smaller, 1 run each
//! cargo bench -p setpoint --bench sdk -- pods controller   # only these
//! ```
//!
//! Benchmarks: `informer` (cache memory and sync time for 1 KiB ConfigMaps), `pods` (cache
//! memory for realistic Pods, whole, stripped and metadata-only), `controller` (no-op
//! reconciles per second and memory, Setpoint's controller and kube-runtime's).
//!
//! Everything runs in this process: Setpoint's API server on a memory store, reached through
//! the in-process transport or over HTTPS on a loopback port, and the controllers. The global
//! allocator is wrapped to count live heap bytes (the bytes asked for; allocator overhead is
//! not counted), so memory figures are differences of the whole process's heap taken when it
//! is quiet. The counting costs a few atomic operations per allocation, in every variant alike.

use std::alloc::System;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[path = "sdk/controller.rs"]
mod controller;
#[path = "sdk/heap.rs"]
mod heap;
#[path = "sdk/informer.rs"]
mod informer;
#[path = "sdk/objects.rs"]
mod objects;
#[path = "sdk/report.rs"]
mod report;
#[path = "sdk/server.rs"]
mod server;

/// Counts every allocation, so benchmarks can read the live heap.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The benchmarks, by name, in the order they run.
const BENCHMARKS: &[&str] = &["informer", "pods", "controller"];

/// What the command line asked for.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Fewer objects and one run per variant.
    pub(crate) quick: bool,
    /// Runs per variant (the median is reported, with the spread).
    pub(crate) runs: usize,
    /// The benchmarks to run.
    only: Vec<String>,
}

impl Settings {
    fn from_args() -> Result<Settings> {
        let mut quick = false;
        let mut runs = None;
        let mut only = Vec::new();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                // `cargo bench` passes `--bench` to every bench target.
                "--bench" => {}
                "--quick" => quick = true,
                "--runs" => {
                    let n = args.next().context("--runs needs a number")?;
                    runs = Some(n.parse().with_context(|| format!("--runs {n}"))?);
                }
                name if BENCHMARKS.contains(&name) => only.push(name.to_owned()),
                other => bail!(
                    "unknown argument {other:?}: expected --quick, --runs N, or benchmark names ({})",
                    BENCHMARKS.join(", ")
                ),
            }
        }
        if only.is_empty() {
            only = BENCHMARKS.iter().map(|s| (*s).to_owned()).collect();
        }
        Ok(Settings {
            quick,
            runs: runs.unwrap_or(if quick { 1 } else { 3 }),
            only,
        })
    }
}

fn main() -> Result<()> {
    let settings = Settings::from_args()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(run(settings))
}

async fn run(settings: Settings) -> Result<()> {
    let started = Instant::now();
    let machine = machine();
    println!("{machine}");
    let mut tables = Vec::new();
    for name in &settings.only {
        let table = match name.as_str() {
            "informer" => informer::configmaps(&settings).await?,
            "pods" => informer::pods(&settings).await?,
            _ => controller::controllers(&settings).await?,
        };
        println!("\n{}", table.markdown());
        tables.push(table);
    }
    println!(
        "\n## Results ({}{} per variant: median (lowest–highest); {:.0} s)\n\n{machine}\n",
        if settings.quick { "quick, " } else { "" },
        match settings.runs {
            1 => "1 run".to_owned(),
            n => format!("{n} runs"),
        },
        started.elapsed().as_secs_f64()
    );
    for table in &tables {
        println!("{}", table.markdown());
    }
    Ok(())
}

/// CPUs, CPU model, memory and load average, as markdown list items.
fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown", |(_, m)| m.trim());
    let meminfo = read("/proc/meminfo");
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or("unknown".to_owned(), |kib| {
            format!("{:.1} GiB", kib / 1024.0 / 1024.0)
        });
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = read("/proc/loadavg");
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "- CPUs (nproc): {cpus}\n- CPU model: {model}\n- memory: {memory}\n- load average at start: {}",
        load.join(" ")
    )
}
