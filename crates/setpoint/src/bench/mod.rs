//! `setpoint bench`: measurements of Setpoint's components on the machine at hand, printed as a
//! table to read and as a markdown table to paste into `docs/benchmarks.md`.

mod api;
mod console;
mod flood;
mod gitops;
mod kubeconfig;
mod latency;
mod machine;
mod pod_network;
mod providers;
mod report;
mod scale;
mod server;
mod services;
mod store;
mod streams;
mod usage;
mod workloads;

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::BenchCommand;

/// Runs one `setpoint bench` subcommand.
pub(crate) async fn bench(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Store(args) => store::bench_store(args).await,
        BenchCommand::Api(args) => api::bench_api(args).await,
        BenchCommand::Workloads(args) => workloads::bench_workloads(args).await,
        BenchCommand::Services(args) => services::bench_services(&args).await,
        BenchCommand::PodNetwork(args) => pod_network::bench_pod_network(&args),
        BenchCommand::Streams(args) => streams::bench_streams(args).await,
        BenchCommand::Flood(args) => flood::bench_flood(args).await,
        BenchCommand::Gitops(args) => gitops::bench_gitops(args).await,
        BenchCommand::Providers(args) => providers::bench_providers(args).await,
        BenchCommand::Scale(args) => scale::bench_scale(args).await,
        BenchCommand::Console(args) => console::bench_console(args).await,
    }
}

/// The benchmarks asked for (all when none), each once, in their canonical order `all`.
fn selected<T: Copy + PartialEq>(all: &[T], only: &[T]) -> Vec<T> {
    all.iter()
        .copied()
        .filter(|bench| only.is_empty() || only.contains(bench))
        .collect()
}

/// Where a benchmark's temporary data directory goes by default: `./target` when it exists (a
/// real disk in a checkout, where `/tmp` is often a tmpfs that makes fsync free), else the
/// system's temporary directory.
fn default_parent() -> PathBuf {
    let target = PathBuf::from("target");
    if target.is_dir() {
        target
    } else {
        std::env::temp_dir()
    }
}
