//! The [`Store`] trait: what the API server needs from a revisioned key-value store, shaped so
//! that etcd v3 provides it directly and the embedded backend provides it faster.

use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;
use setpoint_core::Revision;

use crate::error::{Result, StoreError};
use crate::types::{Event, KeyValue, ListRequest, ListResult, WatchBatch};

/// The changes under a prefix, in revision order, as batches. A stream that ends cleanly was
/// closed by the store (shutdown); one that yields an error ends after it. Dropping it cancels
/// the watch.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchBatch>> + Send>>;

/// A revisioned (MVCC) key-value store with watch.
///
/// Promises, for every backend (checked by the `conformance` suite):
/// - every successful write gets the next global [`Revision`]; a failed write changes nothing
///   and consumes no revision;
/// - an acknowledged write is durable as the backend defines durability (fsynced for the
///   embedded store on disk, quorum-committed for etcd);
/// - reads see every write acknowledged before they started;
/// - a watch from revision `R` delivers every change under its prefix with a revision above `R`
///   exactly once, in order, or ends with [`StoreError::Compacted`].
///
/// All methods are cancel-safe in the sense that dropping a future never corrupts the store;
/// a write whose future is dropped may or may not have been applied.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The revision of the latest change (0 for an empty store).
    async fn current_revision(&self) -> Result<Revision>;

    /// The current value of `key`, if it exists.
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>>;

    /// The keys under a prefix at a revision, in key order, one page at a time.
    ///
    /// Fails with [`StoreError::Compacted`] for a revision older than the retained history and
    /// [`StoreError::FutureRevision`] for one not reached yet.
    async fn list(&self, request: ListRequest) -> Result<ListResult>;

    /// How many keys exist under `prefix` now.
    async fn count(&self, prefix: &[u8]) -> Result<u64>;

    /// Creates `key` if it does not exist; otherwise fails with [`StoreError::AlreadyExists`]
    /// carrying the current value. Returns the stored key-value.
    async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue>;

    /// Replaces the value of an existing `key`. With `expected` set, only if the key's mod
    /// revision equals it, else [`StoreError::Conflict`] with the current value. A missing key
    /// is [`StoreError::NotFound`]. Returns the stored key-value.
    async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue>;

    /// Deletes an existing `key`, with the same precondition as [`Store::update`]. Returns the
    /// delete event: `kv.mod_revision` is the deletion's revision and `prev` the deleted value.
    async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event>;

    /// Watches the keys under `prefix` for changes with a revision above `after`.
    ///
    /// Fails at once with [`StoreError::Compacted`] if changes after `after` are no longer
    /// retained. `after` may be ahead of the current revision: the watch waits for it.
    /// If compaction later overtakes a watch that has not delivered everything, the stream
    /// yields [`StoreError::Compacted`] with `requested` set to the last revision it delivered
    /// (or `after`), then ends. Each batch's `progress` is above the previous one and above
    /// `after`; how changes are split into batches, and whether pure progress batches are sent,
    /// is up to the backend.
    async fn watch(&self, prefix: Bytes, after: Revision) -> Result<WatchStream>;

    /// Whether a watch learns promptly (within about a second) that it has delivered every
    /// change up to the store's current revision, even when nothing under its prefix changes:
    /// through progress batches the store sends on its own or on request.
    ///
    /// When false (etcd before 3.4.31 / 3.5.13, which cannot be asked for progress safely), a
    /// reader that must see the latest state cannot wait for a watch to catch up, and reads the
    /// store instead. True unless a backend says otherwise.
    fn watch_progress_is_prompt(&self) -> bool {
        true
    }

    /// Forgets history up to and including `revision`: lists at older revisions and watches from
    /// them then fail with [`StoreError::Compacted`]. Current values are kept.
    async fn compact(&self, revision: Revision) -> Result<()>;
}

/// The first key after every key that starts with `prefix` (the end of a prefix range), or
/// `None` when no such key exists (an empty prefix, or one of only `0xff` bytes).
#[must_use]
pub fn prefix_end(prefix: &[u8]) -> Option<Bytes> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(Bytes::from(end));
        }
    }
    None
}

/// Checks the shape of a list request; backends call this before reading.
pub(crate) fn validate_list(request: &ListRequest) -> Result<()> {
    if let Some(start) = &request.start {
        if !start.starts_with(&request.prefix) {
            return Err(StoreError::InvalidArgument(format!(
                "start key {:?} is outside the listed prefix {:?}",
                String::from_utf8_lossy(start),
                String::from_utf8_lossy(&request.prefix)
            )));
        }
    }
    Ok(())
}

/// Checks a key for a write; backends call this before writing.
pub(crate) fn validate_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(StoreError::InvalidArgument("the key is empty".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_should_bound_exactly_the_prefixed_keys() {
        assert_eq!(prefix_end(b"/a/").as_deref(), Some(&b"/a0"[..]));
        assert_eq!(prefix_end(b"a\xff").as_deref(), Some(&b"b"[..]));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
