//! The background compactor. Every interval it (1) compacts history beyond the retention
//! window — older than `history_max_age` or more than `history_revisions` back, always keeping
//! the newest `history_min_revisions` — through the writer, so compaction is logged in order
//! with writes; and (2) when whole log segments hold nothing newer than the compacted revision,
//! writes a snapshot at that revision and removes them, so the files do not grow without bound.
//! Snapshots are written from an O(1) copy of the index, without holding any lock, so writers
//! are never stalled.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use setpoint_core::Revision;
use tokio::sync::oneshot;

use super::config::EmbeddedConfig;
use super::shared::Shared;
use super::state::{self, Index};
use super::wal::Segments;
use super::writer::Request;
use super::{files, snapshot};
use crate::error::Result;

/// The compactor thread's state.
pub(super) struct Compactor {
    pub(super) shared: Arc<Shared>,
    pub(super) writer: Sender<Request>,
    pub(super) config: EmbeddedConfig,
    /// `None` for a store kept only in memory.
    pub(super) disk: Option<(PathBuf, Segments)>,
    /// Size of the newest snapshot.
    pub(super) snapshot_bytes: u64,
}

impl Compactor {
    /// Runs every `interval` until `stop` is dropped.
    pub(super) fn run(mut self, interval: Duration, stop: Receiver<()>) {
        loop {
            match stop.recv_timeout(interval) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
            if let Err(error) = self.step(Instant::now()) {
                tracing::warn!(%error, "background compaction failed; will retry");
            }
        }
    }

    fn step(&mut self, now: Instant) -> Result<()> {
        if let Some(target) = self.retention_target(now) {
            let (reply, answer) = oneshot::channel();
            if self
                .writer
                .send(Request::Compact {
                    revision: target,
                    reply,
                })
                .is_err()
            {
                return Ok(()); // shutting down
            }
            match answer.blocking_recv() {
                Ok(result) => result?,
                Err(_) => return Ok(()),
            }
        }
        self.maybe_snapshot()
    }

    /// The revision history should be compacted to now, if it is past the compacted one.
    fn retention_target(&self, now: Instant) -> Option<Revision> {
        let state = self.shared.state.read();
        let current = state.revision.get();
        let by_count = current.saturating_sub(self.config.history_revisions);
        let by_age = now
            .checked_sub(self.config.history_max_age)
            .and_then(|cutoff| {
                state
                    .commit_times
                    .iter()
                    .take_while(|(_, at)| *at <= cutoff)
                    .last()
                    .map(|(r, _)| r.get())
            })
            .unwrap_or(0);
        let ceiling = current.saturating_sub(self.config.history_min_revisions);
        let target = by_count.max(by_age).min(ceiling);
        (target > state.compacted.get()).then_some(Revision(target))
    }

    /// Writes a snapshot at the compacted revision and removes the segments it replaces, when
    /// they add up to more than the snapshot costs to write.
    fn maybe_snapshot(&mut self) -> Result<()> {
        let Some((dir, segments)) = &self.disk else {
            return Ok(());
        };
        let compacted = self.shared.state.read().compacted;
        let replaceable: u64 = {
            let segments = segments.lock();
            let closed = &segments[..segments.len().saturating_sub(1)];
            closed
                .iter()
                .filter(|s| s.last_revision <= compacted)
                .map(|s| s.bytes)
                .sum()
        };
        if replaceable == 0 || replaceable < self.config.segment_bytes.max(self.snapshot_bytes) {
            return Ok(());
        }

        let (at, index) = self.state_at_compacted();
        let started = Instant::now();
        let (path, bytes) = snapshot::write(dir, at, &index)?;
        let removed = remove_replaced(dir, segments, at)?;
        tracing::info!(
            snapshot = %path.display(),
            revision = %at,
            keys = index.len(),
            bytes,
            removed_segments = removed,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "wrote snapshot"
        );
        self.snapshot_bytes = bytes;
        Ok(())
    }

    /// The index as of the compacted revision: the current index rolled back over the
    /// retained history. Copies are O(1) and the roll-back runs outside the lock.
    fn state_at_compacted(&self) -> (Revision, Index) {
        let (compacted, mut index, history) = {
            let state = self.shared.state.read();
            (state.compacted, state.index.clone(), state.history.clone())
        };
        state::roll_back(&mut index, history.iter());
        (compacted, index)
    }
}

/// Removes the closed segments and snapshots that the snapshot at `at` makes redundant.
fn remove_replaced(dir: &std::path::Path, segments: &Segments, at: Revision) -> Result<usize> {
    let doomed: Vec<_> = {
        let mut segments = segments.lock();
        let active = segments.len().saturating_sub(1);
        let (old, keep): (Vec<_>, Vec<_>) = segments
            .drain(..)
            .enumerate()
            .partition(|(i, s)| *i < active && s.last_revision <= at);
        *segments = keep.into_iter().map(|(_, s)| s).collect();
        old.into_iter().map(|(_, s)| s.path).collect()
    };
    for path in &doomed {
        files::remove(path)?;
    }
    for (revision, path) in files::list(dir, false)?.snapshots {
        if revision < at {
            files::remove(&path)?;
        }
    }
    files::sync_dir(dir)?;
    Ok(doomed.len())
}
