//! Errors of the [`Store`](crate::Store) trait, shared by every backend so that the API server
//! maps each to one Kubernetes `Status`.

use setpoint_core::Revision;

use crate::types::KeyValue;

/// Result of a store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why a store operation failed. A failed write changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A create found the key already present.
    #[error("key already exists (mod revision {})", current.mod_revision)]
    AlreadyExists {
        /// The key-value that is there.
        current: Box<KeyValue>,
    },
    /// An update or delete named a key that does not exist.
    #[error("key not found")]
    NotFound,
    /// An update or delete expected another mod revision than the key has.
    #[error("key was modified: expected mod revision {expected}, found {}", current.mod_revision)]
    Conflict {
        /// The mod revision the caller expected.
        expected: Revision,
        /// The key-value as it is now.
        current: Box<KeyValue>,
    },
    /// The revision asked for (a list or watch start) is older than the retained history.
    #[error("revision {requested} has been compacted; the oldest retained is after {compacted}")]
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// History up to and including this revision is gone.
        compacted: Revision,
    },
    /// A list asked for a revision the store has not reached.
    #[error("revision {requested} is in the future; the store is at {current}")]
    FutureRevision {
        /// The revision asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// The request itself is malformed (empty key, a start key outside the prefix, …).
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    /// A value is larger than the store accepts.
    #[error("value of {size} bytes exceeds the limit of {limit} bytes")]
    ValueTooLarge {
        /// The value's size.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// Stored data failed its checksum or does not decode. Never served as data.
    #[error("store data is corrupt: {0}")]
    Corrupt(String),
    /// The operating system failed a read or write.
    #[error("store I/O failed while {context}")]
    Io {
        /// What the store was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The store is shut down, or stopped accepting writes after a failed write to disk (its
    /// on-disk state is then only known after a restart).
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            context: context.into(),
            source,
        }
    }
}
