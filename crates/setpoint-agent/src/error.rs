//! Why the agent stopped.

/// Why the agent stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The API refused or failed a request the agent cannot go on without.
    #[error("talking to the API server: {0}")]
    Api(#[from] kube::Error),
    /// The agent's root directory or its HTTPS endpoint could not be set up.
    #[error("{what}: {source}")]
    Io {
        /// What the agent was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}
