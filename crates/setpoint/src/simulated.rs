//! `setpoint server --simulated-nodes N`: nodes whose pods run without processes, for scale
//! tests.

use anyhow::{Context, Result};
use clap::Args;
use setpoint_agent::SimulatedNodes;
use setpoint_runtime::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Flags of `setpoint server` about simulated nodes.
#[derive(Debug, Args)]
pub(crate) struct SimulatedArgs {
    /// Run this many simulated nodes (`sim-0`, `sim-1`, …) whose pods become `Running`
    /// without processes.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) simulated_nodes: u32,
}

/// Starts the simulated nodes, if any were asked for.
pub(crate) fn start(
    args: &SimulatedArgs,
    client: Client,
    shutdown: CancellationToken,
) -> Option<JoinHandle<Result<()>>> {
    if args.simulated_nodes == 0 {
        return None;
    }
    let nodes = SimulatedNodes::new(args.simulated_nodes);
    Some(tokio::spawn(async move {
        setpoint_agent::run_simulated(client, nodes, shutdown)
            .await
            .context("the simulated nodes")
    }))
}
