//! [`JobError`]: why one sync of a Job failed. Every variant is retried with the key's backoff.

/// Why a Job sync failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JobError {
    /// A pod could not be created.
    #[error("creating a pod for job {job}")]
    Create {
        /// `namespace/name` of the Job.
        job: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A pod could not be deleted.
    #[error("deleting pod {pod} of job {job}")]
    Delete {
        /// `namespace/name` of the Job.
        job: String,
        /// The pod's name.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A pod's tracking finalizer could not be removed.
    #[error("removing the tracking finalizer of pod {pod} of job {job}")]
    Finalizer {
        /// `namespace/name` of the Job.
        job: String,
        /// The pod's name.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The pod index the loop files pods under is missing from the pod cache.
    #[error("reading the pod cache")]
    Cache(#[from] setpoint_runtime::CacheError),
    /// The status could not be written.
    #[error("writing the status of job {job}")]
    Status {
        /// `namespace/name` of the Job.
        job: String,
        /// The status update error.
        #[source]
        source: setpoint_runtime::StatusError,
    },
}
