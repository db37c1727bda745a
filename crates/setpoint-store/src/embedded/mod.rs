//! The embedded backend: an in-memory MVCC index made durable by a checksummed write-ahead log
//! with group commit, snapshots and background compaction. The default store; nothing to
//! install. Layout and invariants: `docs/design/storage.md`.

mod config;

pub use config::EmbeddedConfig;

use async_trait::async_trait;
use bytes::Bytes;
use setpoint_core::Revision;

use crate::error::Result;
use crate::store::{Store, WatchStream};
use crate::types::{Event, KeyValue, ListRequest, ListResult};

/// The embedded store. Cheap to clone: clones share one store. The store shuts down when the last
/// clone is dropped (or on [`EmbeddedStore::close`]).
#[derive(Clone)]
pub struct EmbeddedStore {}

impl EmbeddedStore {
    /// Opens (or creates) the store described by `config`, recovering from its data directory.
    ///
    /// Fails with [`crate::StoreError::Corrupt`] if the data on disk fails its checksums anywhere
    /// but in a torn final write, which was never acknowledged and is discarded.
    pub fn open(config: EmbeddedConfig) -> Result<EmbeddedStore> {
        let _ = config;
        todo!()
    }

    /// The oldest revision a list or watch may start from: history up to here is compacted.
    pub fn compacted_revision(&self) -> Revision {
        todo!()
    }

    /// Stops accepting writes, waits for the writes in flight to be durable and acknowledged,
    /// and stops the background tasks. Further calls fail with `Unavailable`.
    pub fn close(&self) {
        todo!()
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn current_revision(&self) -> Result<Revision> {
        todo!()
    }
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let _ = key;
        todo!()
    }
    async fn list(&self, request: ListRequest) -> Result<ListResult> {
        let _ = request;
        todo!()
    }
    async fn count(&self, prefix: &[u8]) -> Result<u64> {
        let _ = prefix;
        todo!()
    }
    async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue> {
        let _ = (key, value);
        todo!()
    }
    async fn update(&self, key: Bytes, value: Bytes, expected: Option<Revision>) -> Result<KeyValue> {
        let _ = (key, value, expected);
        todo!()
    }
    async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event> {
        let _ = (key, expected);
        todo!()
    }
    async fn watch(&self, prefix: Bytes, after: Revision) -> Result<WatchStream> {
        let _ = (prefix, after);
        todo!()
    }
    async fn compact(&self, revision: Revision) -> Result<()> {
        let _ = revision;
        todo!()
    }
}
