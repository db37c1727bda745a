//! What the agent is told at start.

use std::path::PathBuf;

/// How to run the agent for one node.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The Node's name.
    pub node_name: String,
    /// Where pods' working directories, logs and the agent's own state live.
    pub root_dir: PathBuf,
}
