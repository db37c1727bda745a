//! The agent's main loop.

use setpoint_runtime::Client;
use tokio_util::sync::CancellationToken;

use crate::{AgentConfig, AgentError};

/// Runs the agent for `config.node_name` until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    config: AgentConfig,
    shutdown: CancellationToken,
) -> Result<(), AgentError> {
    let _ = (client, config);
    shutdown.cancelled().await;
    Ok(())
}
