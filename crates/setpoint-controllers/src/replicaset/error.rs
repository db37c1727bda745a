//! [`ReplicaSetError`]: why one sync of a ReplicaSet failed. Every variant is retried with the
//! key's backoff; none is terminal, since API errors (a full quota, a webhook, a conflict with a
//! stale cache) go away by themselves.

/// Why a ReplicaSet sync failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplicaSetError {
    /// A pod could not be created from the template.
    #[error("creating a pod for {replicaset}")]
    Create {
        /// `namespace/name` of the ReplicaSet.
        replicaset: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A surplus pod could not be deleted.
    #[error("deleting pod {pod} of {replicaset}")]
    Delete {
        /// `namespace/name` of the ReplicaSet.
        replicaset: String,
        /// The pod's name.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// An orphan pod could not be adopted, a pod that no longer matches released, or the
    /// live re-read of the ReplicaSet before adopting failed.
    #[error("claiming pods")]
    Claim(#[from] setpoint_runtime::owner::ClaimError),
    /// The pod index the loop files pods under is missing from the pod cache.
    #[error("reading the pod cache")]
    Cache(#[from] setpoint_runtime::CacheError),
    /// The status could not be written.
    #[error("writing the status of {replicaset}")]
    Status {
        /// `namespace/name` of the ReplicaSet.
        replicaset: String,
        /// The status update error.
        #[source]
        source: setpoint_runtime::StatusError,
    },
}
