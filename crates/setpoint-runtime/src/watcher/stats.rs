//! Counters a watcher keeps about itself, read by the informer that runs it for its metrics
//! and `last_error`.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// What a watcher has done so far. Shared between the watcher and its reader.
#[derive(Debug, Default)]
pub(crate) struct WatchStats {
    /// Complete lists yielded (initial and relists).
    pub(crate) lists: AtomicU64,
    /// Watch requests sent (streaming lists included).
    pub(crate) watches: AtomicU64,
    /// Watches that ended or failed and were renewed from their resource version.
    pub(crate) watch_restarts: AtomicU64,
    /// Failed lists and watches.
    pub(crate) errors: AtomicU64,
    /// The most recent failure, cleared by the next successful list or watch request.
    last_error: Mutex<Option<String>>,
}

impl WatchStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Records a failure.
    pub(crate) fn failed(&self, report: String) {
        Self::bump(&self.errors);
        *self.last_error.lock() = Some(report);
    }

    /// Records a success: the last error no longer holds.
    pub(crate) fn succeeded(&self) {
        let mut last = self.last_error.lock();
        if last.is_some() {
            *last = None;
        }
    }

    /// The most recent failure, if nothing succeeded since.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }
}
