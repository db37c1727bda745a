//! `setpoint bench`: measurements of Setpoint's components on the machine at hand, printed as a
//! table to read and as a markdown table to paste into `docs/benchmarks.md`.

mod api;
mod latency;
mod machine;
mod report;
mod store;

use anyhow::Result;

use crate::cli::BenchCommand;

/// Runs one `setpoint bench` subcommand.
pub(crate) async fn bench(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Store(args) => store::bench_store(args).await,
        BenchCommand::Api(args) => api::bench_api(args).await,
    }
}
