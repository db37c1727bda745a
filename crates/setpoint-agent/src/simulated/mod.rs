//! Simulated nodes (as KWOK does): Nodes that register and keep their Leases like real agents,
//! and whose pods become `Running` without processes.

use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

use crate::AgentError;

/// How many simulated nodes to run, and how they behave.
#[derive(Debug, Clone)]
pub struct SimulatedNodes {
    names: Vec<String>,
}

impl SimulatedNodes {
    /// `count` nodes named `sim-0`, `sim-1`, ….
    pub fn new(count: u32) -> SimulatedNodes {
        SimulatedNodes {
            names: (0..count).map(|i| format!("sim-{i}")).collect(),
        }
    }

    /// One node with this name (`setpoint agent --simulated`).
    pub fn named(name: &str) -> SimulatedNodes {
        SimulatedNodes {
            names: vec![name.to_owned()],
        }
    }
}

/// Runs the simulated nodes until `shutdown` is cancelled.
pub async fn run_simulated(
    client: Client,
    nodes: SimulatedNodes,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let _ = (client, nodes.names);
    shutdown.cancelled().await;
    Ok(())
}
