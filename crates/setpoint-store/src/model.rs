//! The reference model: every change kept in a list, every read recomputed from it. Slow and
//! obviously correct; the conformance suite checks it like any backend, and the randomized tests
//! compare the real backends with it.
//!
//! Use it to check another [`Store`] and in tests that need a store but not its performance.
//! It promises exactly the semantics of the [`Store`] trait, with these choices where the trait
//! leaves room:
//! - values larger than [`MODEL_MAX_VALUE_BYTES`] (4 MiB, the embedded store's default) are
//!   refused; arguments (empty key, value size) are checked before the key's state is looked at;
//! - `get` of the empty key finds nothing;
//! - a watch sends a batch whenever the store's revision has passed what it has delivered, so
//!   every write (even outside its prefix) wakes it with at least a progress notification;
//! - a watch whose undelivered history is compacted fails with [`StoreError::Compacted`] whose
//!   `requested` is the revision it had delivered up to.
//!
//! Nothing is ever forgotten: compaction only moves the line below which reads are refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use setpoint_core::Revision;
use tokio::sync::watch;

use crate::error::{Result, StoreError};
use crate::store::{validate_key, validate_list, Store, WatchStream};
use crate::types::{Event, EventKind, KeyValue, ListRequest, ListResult, WatchBatch};

/// The largest value the model accepts: the embedded store's default limit.
pub(crate) const MODEL_MAX_VALUE_BYTES: usize = 4 << 20;

/// The in-memory reference model of a [`Store`]. Cheap to clone: clones share one store. Open
/// watches end when the last clone is dropped.
///
/// Every method is cancel-safe: each does all its work at once under a lock, so a dropped future
/// did all of it or none of it.
#[derive(Clone)]
pub struct ModelStore {
    shared: Arc<Shared>,
}

/// What the clones of one model share.
struct Shared {
    inner: Mutex<Inner>,
    /// Touched after every write and compaction, to wake the watches; dropped with the store,
    /// which ends them.
    changed: watch::Sender<()>,
}

/// The model's whole state.
struct Inner {
    /// Every change ever made, oldest first: `history[i]` happened at revision `i + 1`, so the
    /// current revision is `history.len()`. Compaction never shortens it.
    history: Vec<Event>,
    /// Reads below this revision fail with [`StoreError::Compacted`]; at most the current
    /// revision.
    compacted: Revision,
}

impl ModelStore {
    /// An empty store, at revision 0.
    #[must_use]
    pub fn new() -> Self {
        let (changed, _) = watch::channel(());
        ModelStore {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    history: Vec::new(),
                    compacted: Revision::ZERO,
                }),
                changed,
            }),
        }
    }

    /// The oldest revision a list or watch may start from: history up to here is compacted.
    #[must_use]
    pub fn compacted_revision(&self) -> Revision {
        self.shared.inner.lock().compacted
    }

    /// Runs a write on the state, then wakes the watches.
    fn write<T>(&self, f: impl FnOnce(&mut Inner) -> Result<T>) -> Result<T> {
        let out = {
            let mut inner = self.shared.inner.lock();
            let out = f(&mut inner);
            inner.check_invariants();
            out
        };
        self.shared.changed.send_replace(());
        out
    }
}

impl Default for ModelStore {
    fn default() -> Self {
        ModelStore::new()
    }
}

impl Inner {
    fn current(&self) -> Revision {
        Revision(self.history.len() as u64)
    }

    /// The history up to and including `revision` (which must not be in the future).
    fn history_to(&self, revision: Revision) -> &[Event] {
        &self.history[..to_index(revision)]
    }

    /// The current value of `key`: the last change to it, if that was a put.
    fn latest(&self, key: &[u8]) -> Option<&KeyValue> {
        let last = self.history.iter().rev().find(|e| e.kv.key == key)?;
        (last.kind == EventKind::Put).then_some(&last.kv)
    }

    /// Every key's value at `revision`, by replaying the history up to it.
    fn state_at(&self, revision: Revision) -> BTreeMap<Bytes, KeyValue> {
        let mut state = BTreeMap::new();
        for event in self.history_to(revision) {
            match event.kind {
                EventKind::Put => state.insert(event.kv.key.clone(), event.kv.clone()),
                EventKind::Delete => state.remove(&event.kv.key),
            };
        }
        state
    }

    /// Refuses a read at a revision not reached yet or compacted away.
    fn check_readable(&self, revision: Revision) -> Result<()> {
        let current = self.current();
        if revision > current {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current,
            });
        }
        if revision < self.compacted {
            return Err(StoreError::Compacted {
                requested: revision,
                compacted: self.compacted,
            });
        }
        Ok(())
    }

    /// The current value of an existing `key` that an update or delete may change.
    fn precondition(&self, key: &[u8], expected: Option<Revision>) -> Result<KeyValue> {
        let current = self.latest(key).ok_or(StoreError::NotFound)?;
        match expected {
            Some(expected) if expected != current.mod_revision => Err(StoreError::Conflict {
                expected,
                current: Box::new(current.clone()),
            }),
            _ => Ok(current.clone()),
        }
    }

    /// Records a change at the next revision.
    fn append(&mut self, kind: EventKind, kv: KeyValue, prev: Option<KeyValue>) -> Event {
        let event = Event { kind, kv, prev };
        self.history.push(event.clone());
        event
    }

    fn check_invariants(&self) {
        if cfg!(debug_assertions) {
            if let Some(last) = self.history.last() {
                assert_eq!(last.revision(), self.current(), "history out of step");
            }
            assert!(
                self.compacted <= self.current(),
                "compacted past the current revision"
            );
        }
    }
}

fn to_index(revision: Revision) -> usize {
    usize::try_from(revision.get()).expect("revision fits in memory")
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MODEL_MAX_VALUE_BYTES {
        return Err(StoreError::ValueTooLarge {
            size: value.len(),
            limit: MODEL_MAX_VALUE_BYTES,
        });
    }
    Ok(())
}

#[async_trait]
impl Store for ModelStore {
    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.shared.inner.lock().current())
    }

    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        Ok(self.shared.inner.lock().latest(key).cloned())
    }

    async fn list(&self, request: ListRequest) -> Result<ListResult> {
        validate_list(&request)?;
        let inner = self.shared.inner.lock();
        let revision = request.revision.unwrap_or_else(|| inner.current());
        inner.check_readable(revision)?;
        let from = request.start.as_ref().unwrap_or(&request.prefix);
        let matching: Vec<KeyValue> = inner
            .state_at(revision)
            .range(from.clone()..)
            .take_while(|(key, _)| key.starts_with(&request.prefix))
            .map(|(_, kv)| kv.clone())
            .collect();
        let returned = match request.limit {
            None | Some(0) => matching.len(),
            Some(limit) => limit.min(matching.len()),
        };
        Ok(ListResult {
            remaining: (matching.len() - returned) as u64,
            kvs: matching[..returned].to_vec(),
            revision,
        })
    }

    async fn count(&self, prefix: &[u8]) -> Result<u64> {
        let inner = self.shared.inner.lock();
        let state = inner.state_at(inner.current());
        Ok(state.keys().filter(|key| key.starts_with(prefix)).count() as u64)
    }

    async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue> {
        validate_key(&key)?;
        check_value(&value)?;
        self.write(|inner| {
            if let Some(current) = inner.latest(&key) {
                return Err(StoreError::AlreadyExists {
                    current: Box::new(current.clone()),
                });
            }
            let revision = inner.current().next();
            let kv = KeyValue {
                key,
                value,
                create_revision: revision,
                mod_revision: revision,
                version: 1,
            };
            Ok(inner.append(EventKind::Put, kv, None).kv)
        })
    }

    async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        validate_key(&key)?;
        check_value(&value)?;
        self.write(|inner| {
            let prev = inner.precondition(&key, expected)?;
            let kv = KeyValue {
                key,
                value,
                create_revision: prev.create_revision,
                mod_revision: inner.current().next(),
                version: prev.version + 1,
            };
            Ok(inner.append(EventKind::Put, kv, Some(prev)).kv)
        })
    }

    async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event> {
        validate_key(&key)?;
        self.write(|inner| {
            let prev = inner.precondition(&key, expected)?;
            let kv = KeyValue {
                key,
                value: Bytes::new(),
                create_revision: prev.create_revision,
                mod_revision: inner.current().next(),
                version: prev.version,
            };
            Ok(inner.append(EventKind::Delete, kv, Some(prev)))
        })
    }

    async fn watch(&self, prefix: Bytes, after: Revision) -> Result<WatchStream> {
        let compacted = self.compacted_revision();
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        let watcher = Watcher {
            shared: Arc::downgrade(&self.shared),
            changed: self.shared.changed.subscribe(),
            prefix,
            progress: after,
        };
        let stream = futures::stream::unfold(Some(watcher), |watcher| async move {
            let mut watcher = watcher?;
            match watcher.next_batch().await? {
                Ok(batch) => Some((Ok(batch), Some(watcher))),
                Err(error) => Some((Err(error), None)),
            }
        });
        Ok(Box::pin(stream))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.write(|inner| {
            let current = inner.current();
            if revision > current {
                return Err(StoreError::FutureRevision {
                    requested: revision,
                    current,
                });
            }
            if revision <= inner.compacted {
                return Err(StoreError::Compacted {
                    requested: revision,
                    compacted: inner.compacted,
                });
            }
            inner.compacted = revision;
            Ok(())
        })
    }
}

/// One open watch.
struct Watcher {
    /// Weak, so that a watch does not keep a dropped store alive: it ends instead.
    shared: Weak<Shared>,
    changed: watch::Receiver<()>,
    prefix: Bytes,
    /// Every change under `prefix` up to here has been delivered.
    progress: Revision,
}

impl Watcher {
    /// The next batch once the store has moved past `progress`; `None` once the store is gone.
    async fn next_batch(&mut self) -> Option<Result<WatchBatch>> {
        loop {
            // Marked seen before looking, so that a change made after the look wakes us.
            self.changed.borrow_and_update();
            if let Some(batch) = self.poll_store(&*self.shared.upgrade()?) {
                return Some(batch);
            }
            self.changed.changed().await.ok()?;
        }
    }

    /// The batch due now, if any.
    fn poll_store(&mut self, shared: &Shared) -> Option<Result<WatchBatch>> {
        let inner = shared.inner.lock();
        if inner.compacted > self.progress {
            return Some(Err(StoreError::Compacted {
                requested: self.progress,
                compacted: inner.compacted,
            }));
        }
        let current = inner.current();
        if current <= self.progress {
            return None;
        }
        let events = inner.history_to(current)[to_index(self.progress)..]
            .iter()
            .filter(|event| event.kv.key.starts_with(&self.prefix))
            .cloned()
            .collect();
        self.progress = current;
        Some(Ok(WatchBatch {
            events,
            progress: current,
        }))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    #[tokio::test]
    async fn model_should_refuse_values_over_four_mebibytes() {
        let store = ModelStore::new();
        let err = store
            .create(
                Bytes::from_static(b"k"),
                Bytes::from(vec![0; (4 << 20) + 1]),
            )
            .await
            .expect_err("value over the limit");
        assert!(matches!(
            err,
            StoreError::ValueTooLarge { size, limit: MODEL_MAX_VALUE_BYTES } if size == (4 << 20) + 1
        ));
        store
            .create(Bytes::from_static(b"k"), Bytes::from(vec![0; 4 << 20]))
            .await
            .expect("value at the limit");
    }

    #[tokio::test]
    async fn model_watch_should_end_when_the_store_is_dropped() {
        let store = ModelStore::new();
        let mut watch = store
            .watch(Bytes::new(), Revision::ZERO)
            .await
            .expect("watch");
        drop(store);
        assert!(watch.next().await.is_none());
    }

    #[tokio::test]
    async fn model_watch_should_fail_when_undelivered_history_is_compacted() {
        let store = ModelStore::new();
        let mut watch = store
            .watch(Bytes::new(), Revision::ZERO)
            .await
            .expect("watch");
        store
            .create(Bytes::from_static(b"a"), Bytes::new())
            .await
            .expect("create");
        store
            .create(Bytes::from_static(b"b"), Bytes::new())
            .await
            .expect("create");
        store.compact(Revision(1)).await.expect("compact");
        let err = watch.next().await.expect("an item").expect_err("compacted");
        assert!(matches!(
            err,
            StoreError::Compacted {
                requested: Revision(0),
                compacted: Revision(1)
            }
        ));
        assert!(watch.next().await.is_none());
    }

    #[tokio::test]
    async fn model_watch_should_send_progress_for_writes_outside_its_prefix() {
        let store = ModelStore::new();
        let mut watch = store
            .watch(Bytes::from_static(b"/a/"), Revision::ZERO)
            .await
            .expect("watch");
        store
            .create(Bytes::from_static(b"/b/1"), Bytes::new())
            .await
            .expect("create");
        let batch = watch.next().await.expect("an item").expect("a batch");
        assert_eq!(
            batch,
            WatchBatch {
                events: vec![],
                progress: Revision(1)
            }
        );
    }
}
