//! Simulated nodes (as KWOK does): Nodes that register and keep their Leases like real agents,
//! and whose pods become `Running` without processes.

use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

use crate::AgentError;

/// How many simulated nodes to run, and how they behave.
#[derive(Debug, Clone)]
pub struct SimulatedNodes {
    /// How many nodes.
    pub count: u32,
}

/// Runs the simulated nodes until `shutdown` is cancelled.
pub async fn run_simulated(
    client: Client,
    nodes: SimulatedNodes,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let _ = (client, nodes);
    shutdown.cancelled().await;
    Ok(())
}
