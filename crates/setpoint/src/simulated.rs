//! `setpoint server --simulated-nodes N`: nodes whose pods run without processes, for scale
//! tests.

use std::time::Duration;

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
    /// How long a pod bound to a simulated node stays Pending before it runs: `0s`, `500ms`.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = crate::cli::parse_duration)]
    pub(crate) simulated_start_delay: Duration,
    /// How many pods each simulated node accepts (its `pods` capacity).
    #[arg(long, value_name = "N", default_value_t = 110)]
    pub(crate) simulated_node_pods: u32,
    /// Each simulated node's `cpu` capacity.
    #[arg(long, value_name = "QUANTITY", default_value = "32")]
    pub(crate) simulated_node_cpu: String,
    /// Each simulated node's `memory` capacity.
    #[arg(long, value_name = "QUANTITY", default_value = "256Gi")]
    pub(crate) simulated_node_memory: String,
}

impl SimulatedArgs {
    /// The simulated nodes these flags describe, `count` of them.
    pub(crate) fn nodes(&self, nodes: SimulatedNodes) -> SimulatedNodes {
        nodes
            .start_delay(self.simulated_start_delay)
            .max_pods(self.simulated_node_pods)
            .cpu(&self.simulated_node_cpu)
            .memory(&self.simulated_node_memory)
    }
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
    let nodes = args.nodes(SimulatedNodes::new(args.simulated_nodes));
    Some(tokio::spawn(async move {
        setpoint_agent::run_simulated(client, nodes, shutdown)
            .await
            .context("the simulated nodes")
    }))
}
