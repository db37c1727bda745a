//! [`DaemonSetError`]: why one sync of a DaemonSet failed. Every variant is retried with the
//! key's backoff.

use crate::history::HistoryError;

/// Why a DaemonSet sync failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DaemonSetError {
    /// A pod could not be created for a node.
    #[error("creating a pod for node {node}")]
    Create {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A pod could not be deleted.
    #[error("deleting pod {pod}")]
    Delete {
        /// The pod's name.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Orphan pods could not be adopted or unselected ones released.
    #[error("claiming pods")]
    ClaimPods(#[from] setpoint_runtime::owner::ClaimError),
    /// The revision history could not be read or written.
    #[error("revision history")]
    History(#[from] HistoryError),
    /// The status could not be written.
    #[error("writing the status")]
    Status(#[from] setpoint_runtime::StatusError),
}
