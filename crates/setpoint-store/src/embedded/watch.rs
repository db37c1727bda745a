//! Watches. There is no per-watcher buffer: the retained history *is* the buffer. Each watcher
//! keeps a cursor (the last revision it delivered) and, when woken by a commit, copies the
//! matching events after its cursor out of the history under a brief read lock. A slow watcher
//! therefore never blocks the writer or other watchers and costs no memory of its own; it is
//! ended with [`StoreError::Compacted`] only if compaction overtakes its cursor, after which
//! the client relists (the API answers `410 Gone`).

use std::sync::Arc;

use bytes::Bytes;
use futures::stream;
use setpoint_core::Revision;
use tokio::sync::watch;

use super::shared::Shared;
use crate::error::{Result, StoreError};
use crate::store::WatchStream;
use crate::types::WatchBatch;

/// Most history entries one step looks at, so one batch stays bounded.
const MAX_SCAN: usize = 4096;

/// Starts a watch of `prefix` after `after`.
pub(super) fn watch(shared: Arc<Shared>, prefix: Bytes, after: Revision) -> Result<WatchStream> {
    let compacted = shared.state.read().compacted;
    if after < compacted {
        return Err(StoreError::Compacted {
            requested: after,
            compacted,
        });
    }
    let watcher = Watcher {
        wake: shared.notify.subscribe(),
        shared,
        prefix,
        cursor: after,
    };
    Ok(Box::pin(stream::unfold(
        Some(watcher),
        |watcher| async move {
            let mut watcher = watcher?;
            match watcher.next().await? {
                Ok(batch) => Some((Ok(batch), Some(watcher))),
                Err(e) => Some((Err(e), None)),
            }
        },
    )))
}

struct Watcher {
    shared: Arc<Shared>,
    wake: watch::Receiver<Revision>,
    prefix: Bytes,
    /// Every change under `prefix` up to here has been delivered.
    cursor: Revision,
}

impl Watcher {
    /// The next batch; `None` once the store is closed and everything published is delivered.
    async fn next(&mut self) -> Option<Result<WatchBatch>> {
        loop {
            // Mark the current notification seen *before* reading the state, so a commit that
            // lands after the read is sure to wake `changed` below.
            self.wake.borrow_and_update();
            if let Some(step) = self.scan() {
                return Some(step);
            }
            if self.shared.is_closed() || self.wake.changed().await.is_err() {
                // Closed: deliver whatever was published before the close, then end.
                return self.scan();
            }
        }
    }

    /// Collects the events after the cursor, if the store has moved past it.
    fn scan(&mut self) -> Option<Result<WatchBatch>> {
        let state = self.shared.state.read();
        if state.revision <= self.cursor {
            return None;
        }
        if self.cursor < state.compacted {
            return Some(Err(StoreError::Compacted {
                requested: self.cursor,
                compacted: state.compacted,
            }));
        }
        let from = (self.cursor.get() - state.compacted.get()) as usize;
        let mut events = Vec::new();
        for event in state.history.range(from..).take(MAX_SCAN) {
            self.cursor = event.revision();
            if event.kv.key.starts_with(&self.prefix) {
                events.push(event.clone());
            }
        }
        Some(Ok(WatchBatch {
            events,
            progress: self.cursor,
        }))
    }
}
