//! [`DeploymentError`]: why one sync of a Deployment failed. Every variant is retried with the
//! key's backoff: API errors (a conflict with a stale cache, a quota, a terminating namespace)
//! go away by themselves or with the next change.

/// Why a Deployment sync failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeploymentError {
    /// A ReplicaSet could not be created, updated, adopted, released or deleted.
    #[error("{action} replica set {replicaset} of {deployment}")]
    ReplicaSet {
        /// What was being done ("creating", "scaling", …).
        action: &'static str,
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// The ReplicaSet's name.
        replicaset: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The new ReplicaSet's name was taken by a ReplicaSet with another template;
    /// `status.collisionCount` was raised so the next sync picks another name.
    #[error("replica set {replicaset} of {deployment} exists with another template")]
    HashCollision {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// The name that was taken.
        replicaset: String,
    },
    /// Adopting or releasing ReplicaSets failed (or the live re-read of the Deployment
    /// before adopting).
    #[error("claiming replica sets")]
    Claim(#[from] setpoint_runtime::owner::ClaimError),
    /// The status (or revision annotation) could not be written.
    #[error("writing the status of {deployment}")]
    Status {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// The status update error.
        #[source]
        source: setpoint_runtime::StatusError,
    },
}
