//! [`StatefulSetError`]: why one sync of a StatefulSet failed. Every variant is retried with
//! the key's backoff.

use crate::history::HistoryError;

/// Why a StatefulSet sync failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StatefulSetError {
    /// A pod could not be created.
    #[error("creating pod {pod}")]
    Create {
        /// The pod's name.
        pod: String,
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
    /// A claim could not be created or its owners set.
    #[error("writing claim {claim}")]
    Claim {
        /// The claim's name.
        claim: String,
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
