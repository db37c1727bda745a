//! The embedded backend: an in-memory MVCC index made durable by a checksummed write-ahead log
//! with group commit, snapshots and background compaction. The default store; nothing to
//! install. Layout and invariants: `docs/design/storage.md`.

mod codec;
mod compactor;
mod config;
mod files;
mod recovery;
mod shared;
mod snapshot;
mod state;
mod wal;
mod watch;
mod writer;

pub use config::EmbeddedConfig;

use std::fs::File;
use std::ops::Bound;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use setpoint_core::Revision;
use tokio::sync::oneshot;

use self::compactor::Compactor;
use self::shared::Shared;
use self::state::{Index, State, WriteOp};
use self::writer::{Request, Writer};
use crate::error::{Result, StoreError};
use crate::store::{prefix_end, validate_key, validate_list, Store, WatchStream};
use crate::types::{Event, KeyValue, ListRequest, ListResult};

/// The embedded store. Cheap to clone: clones share one store. The store shuts down when the
/// last clone is dropped (or on [`EmbeddedStore::close`]).
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    config: EmbeddedConfig,
    /// `None` once closed.
    requests: RwLock<Option<mpsc::Sender<Request>>>,
    threads: Mutex<Threads>,
    /// Holds the data directory's lock while open.
    _lock: Option<File>,
}

#[derive(Default)]
struct Threads {
    writer: Option<JoinHandle<()>>,
    compactor: Option<(JoinHandle<()>, mpsc::Sender<()>)>,
}

impl EmbeddedStore {
    /// Opens (or creates) the store described by `config`, recovering from its data directory.
    ///
    /// Fails with [`StoreError::Corrupt`] if the data on disk fails its checksums anywhere but
    /// in a torn final write (which was never acknowledged, and is discarded), and with
    /// [`StoreError::Unavailable`] if another process has the directory open.
    pub fn open(config: EmbeddedConfig) -> Result<EmbeddedStore> {
        let (state, wal, lock, snapshot_bytes) = match &config.dir {
            Some(dir) => {
                let lock = files::create_and_lock(dir)?;
                let recovered = recovery::recover(dir)?;
                let wal = wal::Wal::open(dir, recovered.segments, config.segment_bytes)?;
                (
                    recovered.state,
                    Some(wal),
                    Some(lock),
                    recovered.snapshot_bytes,
                )
            }
            None => (State::new(Index::new(), Revision::ZERO), None, None, 0),
        };
        tracing::debug!(
            dir = ?config.dir,
            revision = %state.revision,
            compacted = %state.compacted,
            keys = state.index.len(),
            "opened embedded store"
        );
        let shared = Arc::new(Shared::new(state));
        let (requests, queue) = mpsc::channel();
        let segments = wal.as_ref().map(wal::Wal::segments);
        let writer = Writer::new(queue, shared.clone(), wal, config.max_batch_ops);
        let mut threads = Threads {
            writer: Some(spawn("setpoint-store-writer", move || writer.run())?),
            compactor: None,
        };
        if let Some(interval) = config.compaction_interval {
            let compactor = Compactor {
                shared: shared.clone(),
                writer: requests.clone(),
                config: config.clone(),
                disk: config.dir.clone().zip(segments),
                snapshot_bytes,
            };
            let (stop, stopped) = mpsc::channel();
            let handle = spawn("setpoint-store-compactor", move || {
                compactor.run(interval, stopped)
            })?;
            threads.compactor = Some((handle, stop));
        }
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                shared,
                config,
                requests: RwLock::new(Some(requests)),
                threads: Mutex::new(threads),
                _lock: lock,
            }),
        })
    }

    /// History up to and including this revision is compacted: lists and watches start here
    /// or later.
    pub fn compacted_revision(&self) -> Revision {
        self.inner.shared.state.read().compacted
    }

    /// Bytes the store's files take on disk (0 in memory).
    pub fn disk_bytes(&self) -> u64 {
        self.inner.config.dir.as_deref().map_or(0, files::dir_bytes)
    }

    /// Stops accepting requests, lets the writes already queued become durable and be
    /// answered, stops the background work and ends every watch once it has delivered what
    /// was committed. Later calls fail with [`StoreError::Unavailable`]. Blocks until done.
    pub fn close(&self) {
        self.inner.close();
    }

    async fn send_write(&self, op: WriteOp) -> Result<Event> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Write { op, reply })?;
        answer.await.map_err(|_| closed())?
    }

    fn send(&self, request: Request) -> Result<()> {
        match &*self.inner.requests.read() {
            Some(requests) => requests.send(request).map_err(|_| closed()),
            None => Err(closed()),
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.shared.is_closed() {
            return Err(closed());
        }
        Ok(())
    }

    fn check_value(&self, value: &Bytes) -> Result<()> {
        let limit = self.inner.config.max_value_bytes;
        if value.len() > limit {
            return Err(StoreError::ValueTooLarge {
                size: value.len(),
                limit,
            });
        }
        Ok(())
    }
}

impl Inner {
    fn close(&self) {
        self.shared.close();
        let mut threads = self.threads.lock();
        if let Some((handle, stop)) = threads.compactor.take() {
            drop(stop);
            let _ = handle.join();
        }
        // Dropping the last sender lets the writer drain its queue and exit.
        self.requests.write().take();
        if let Some(handle) = threads.writer.take() {
            let _ = handle.join();
        }
        // Wake watchers again: the writer may have published after the first wake.
        self.shared.close();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.close();
    }
}

fn closed() -> StoreError {
    StoreError::Unavailable("the store is closed".into())
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| StoreError::io(format!("starting thread {name}"), e))
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn current_revision(&self) -> Result<Revision> {
        self.check_open()?;
        Ok(self.inner.shared.state.read().revision)
    }

    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.check_open()?;
        let state = self.inner.shared.state.read();
        Ok(state
            .index
            .get(key)
            .map(|e| e.to_kv(&Bytes::copy_from_slice(key))))
    }

    async fn list(&self, request: ListRequest) -> Result<ListResult> {
        self.check_open()?;
        validate_list(&request)?;
        let (index, undo, revision) = {
            let state = self.inner.shared.state.read();
            let revision = request.revision.unwrap_or(state.revision);
            state.check_readable(revision)?;
            let undo = if revision < state.revision {
                state.undo_since(revision, &request.prefix)
            } else {
                state::Undo::new()
            };
            (state.index.clone(), undo, revision)
        };
        Ok(state::list(&index, &undo, revision, &request))
    }

    async fn count(&self, prefix: &[u8]) -> Result<u64> {
        self.check_open()?;
        let index = self.inner.shared.state.read().index.clone();
        let start = Bound::Included(Bytes::copy_from_slice(prefix));
        let end = prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Ok(index.range((start, end)).count() as u64)
    }

    async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue> {
        validate_key(&key)?;
        self.check_value(&value)?;
        Ok(self.send_write(WriteOp::Create { key, value }).await?.kv)
    }

    async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        validate_key(&key)?;
        self.check_value(&value)?;
        Ok(self
            .send_write(WriteOp::Update {
                key,
                value,
                expected,
            })
            .await?
            .kv)
    }

    async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event> {
        validate_key(&key)?;
        self.send_write(WriteOp::Delete { key, expected }).await
    }

    async fn watch(&self, prefix: Bytes, after: Revision) -> Result<WatchStream> {
        self.check_open()?;
        watch::watch(self.inner.shared.clone(), prefix, after)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Compact { revision, reply })?;
        answer.await.map_err(|_| closed())?
    }
}
