//! [`ErrorShape`]: a [`StoreError`] reduced to what two backends must agree on, so that answers
//! from different backends (and the model) can be compared with `==`.

use crate::{KeyValue, Revision, StoreError};

/// A [`StoreError`] reduced to what two backends must agree on: the variant and its fields
/// (not the message of an `InvalidArgument`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorShape {
    /// [`StoreError::AlreadyExists`].
    AlreadyExists(KeyValue),
    /// [`StoreError::NotFound`].
    NotFound,
    /// [`StoreError::Conflict`].
    Conflict {
        /// The expected revision.
        expected: Revision,
        /// The current key-value.
        current: KeyValue,
    },
    /// [`StoreError::Compacted`].
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// The compacted revision.
        compacted: Revision,
    },
    /// [`StoreError::FutureRevision`].
    FutureRevision {
        /// The revision asked for.
        requested: Revision,
        /// The current revision.
        current: Revision,
    },
    /// [`StoreError::InvalidArgument`], whatever its message.
    InvalidArgument,
    /// [`StoreError::ValueTooLarge`].
    ValueTooLarge {
        /// The value's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Corruption, I/O failure or unavailability, as displayed: never a correct answer in a
    /// comparison with the model.
    Failure(String),
}

impl From<&StoreError> for ErrorShape {
    fn from(error: &StoreError) -> Self {
        match error {
            StoreError::AlreadyExists { current } => ErrorShape::AlreadyExists((**current).clone()),
            StoreError::NotFound => ErrorShape::NotFound,
            StoreError::Conflict { expected, current } => ErrorShape::Conflict {
                expected: *expected,
                current: (**current).clone(),
            },
            StoreError::Compacted {
                requested,
                compacted,
            } => ErrorShape::Compacted {
                requested: *requested,
                compacted: *compacted,
            },
            StoreError::FutureRevision { requested, current } => ErrorShape::FutureRevision {
                requested: *requested,
                current: *current,
            },
            StoreError::InvalidArgument(_) => ErrorShape::InvalidArgument,
            StoreError::ValueTooLarge { size, limit } => ErrorShape::ValueTooLarge {
                size: *size,
                limit: *limit,
            },
            other => ErrorShape::Failure(other.to_string()),
        }
    }
}

/// A result with its error reduced to an [`ErrorShape`], for comparison.
pub fn outcome<T>(result: crate::Result<T>) -> Result<T, ErrorShape> {
    result.map_err(|e| ErrorShape::from(&e))
}
