//! etcd's failures as the backend sees them: the few that carry meaning for the [`Store`]
//! contract (a compacted or future revision, a request too large) and the rest, which all mean
//! the store is unavailable.
//!
//! [`Store`]: crate::Store

use crate::error::StoreError;

/// Why an etcd request failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// etcd: "mvcc: required revision has been compacted".
    Compacted,
    /// etcd: "mvcc: required revision is a future revision".
    FutureRevision,
    /// etcd: "request is too large" (over its `--max-request-bytes`).
    TooLarge,
    /// Anything else, already mapped.
    Other(StoreError),
}

impl Failure {
    /// Classifies a client error.
    pub(crate) fn classify(error: etcd_client::Error) -> Failure {
        match error {
            etcd_client::Error::GRpcStatus(status) => {
                let message = status.message();
                if message.contains("required revision has been compacted") {
                    Failure::Compacted
                } else if message.contains("required revision is a future revision") {
                    Failure::FutureRevision
                } else if message.contains("request is too large") {
                    Failure::TooLarge
                } else if status.code() == tonic::Code::InvalidArgument {
                    Failure::Other(StoreError::InvalidArgument(format!("etcd: {message}")))
                } else {
                    Failure::Other(StoreError::Unavailable(format!(
                        "etcd failed the request ({:?}): {message}",
                        status.code()
                    )))
                }
            }
            other => Failure::Other(StoreError::Unavailable(format!("etcd: {other}"))),
        }
    }

    /// The failure as a store error where the caller has no better context.
    pub(crate) fn into_store_error(self) -> StoreError {
        match self {
            Failure::Compacted => {
                StoreError::Unavailable("etcd: the revision has been compacted".into())
            }
            Failure::FutureRevision => {
                StoreError::Unavailable("etcd: the revision is in the future".into())
            }
            Failure::TooLarge => StoreError::Unavailable("etcd: the request is too large".into()),
            Failure::Other(error) => error,
        }
    }
}

/// Maps a client error to a store error, without context.
pub(crate) fn from_client(error: etcd_client::Error) -> StoreError {
    Failure::classify(error).into_store_error()
}
