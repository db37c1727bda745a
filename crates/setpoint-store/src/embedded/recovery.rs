//! Opening a data directory: load the newest snapshot, replay the log after it, cut off a torn
//! tail, and remove files a crash left behind. What comes back is exactly the acknowledged
//! state (plus, at most, writes that were durable but not yet acknowledged when the process
//! died), with the history since the snapshot for watches to resume from.

use std::path::Path;
use std::time::Instant;

use setpoint_core::Revision;

use super::codec::LogRecord;
use super::state::{self, Index, State};
use super::wal::{self, SegmentInfo};
use super::{files, snapshot};
use crate::error::{Result, StoreError};

/// The recovered store.
pub(super) struct Recovered {
    pub(super) state: State,
    /// The segments kept, oldest first; appending continues in the last.
    pub(super) segments: Vec<SegmentInfo>,
    /// Size of the snapshot loaded (0 if none).
    pub(super) snapshot_bytes: u64,
}

/// Recovers the store in `dir`, which the caller has locked.
pub(super) fn recover(dir: &Path) -> Result<Recovered> {
    let listing = files::list(dir, true)?;
    let (mut index, snapshot_revision, snapshot_bytes) = match listing.snapshots.last() {
        Some((revision, path)) => {
            let (index, read_revision) = snapshot::read(path)?;
            if read_revision != *revision {
                return Err(StoreError::Corrupt(format!(
                    "snapshot {} holds revision {read_revision}",
                    path.display()
                )));
            }
            let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
            (index, read_revision, bytes)
        }
        None => (Index::new(), Revision::ZERO, 0),
    };
    for (_, older) in listing.snapshots.iter().rev().skip(1) {
        files::remove(older)?;
    }

    let mut state = State::new(index.clone(), snapshot_revision);
    let mut segments = Vec::new();
    let count = listing.segments.len();
    let now = Instant::now();
    for (i, (sequence, path)) in listing.segments.iter().enumerate() {
        if let Some(prev) = segments.last().map(|s: &SegmentInfo| s.sequence) {
            if *sequence != prev + 1 {
                return Err(StoreError::Corrupt(format!(
                    "log segment {} is missing",
                    prev + 1
                )));
            }
        }
        let is_last = i + 1 == count;
        let read = wal::read_segment(path, *sequence, is_last)?;
        if read.records.is_empty() {
            if !is_last {
                return Err(StoreError::Corrupt(format!(
                    "{} has no segment header",
                    path.display()
                )));
            }
            // The crash came while the segment was being started: it holds nothing.
            files::remove(path)?;
            files::sync_dir(dir)?;
            continue;
        }
        if read.tail == wal::Tail::Torn {
            tracing::warn!(
                segment = %path.display(),
                valid_bytes = read.valid_bytes,
                "discarding a torn write at the end of the log (never acknowledged)"
            );
            wal::truncate(path, read.valid_bytes)?;
        }
        let mut last_revision = Revision::ZERO;
        for record in read.records {
            match record {
                LogRecord::SegmentHeader { .. } => {}
                LogRecord::Batch { first, writes } => {
                    let mut events = Vec::with_capacity(writes.len());
                    let mut applied = state.revision;
                    for (offset, write) in writes.iter().enumerate() {
                        let revision = Revision(first.get() + offset as u64);
                        last_revision = revision;
                        if revision <= applied {
                            continue; // already in the snapshot
                        }
                        if revision != applied.next() {
                            return Err(StoreError::Corrupt(format!(
                                "the log jumps from revision {applied} to {revision} in {}",
                                path.display()
                            )));
                        }
                        events.push(state::replay(&mut index, revision, write)?);
                        applied = revision;
                    }
                    state.publish(index.clone(), events, now);
                }
                LogRecord::Compact { revision } => {
                    if revision > state.compacted {
                        state.compact(revision)?;
                    }
                }
            }
        }
        let superseded = !is_last && last_revision <= snapshot_revision;
        if superseded {
            // A crash came between writing a snapshot and removing what it replaced.
            files::remove(path)?;
            continue;
        }
        segments.push(SegmentInfo {
            sequence: *sequence,
            path: path.clone(),
            last_revision,
            bytes: read.valid_bytes,
        });
    }
    #[cfg(debug_assertions)]
    state.check_invariants();
    Ok(Recovered {
        state,
        segments,
        snapshot_bytes,
    })
}
