//! What the writer, the readers, the watchers and the compactor share.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use setpoint_core::Revision;
use tokio::sync::watch;

use super::state::State;

/// State shared by every part of one embedded store.
pub(super) struct Shared {
    /// The published state. The writer holds the write lock only to swap in a committed batch
    /// (and to drop compacted history); readers hold the read lock only to clone what they need.
    pub(super) state: RwLock<State>,
    /// The latest published revision; watchers wait on it.
    pub(super) notify: watch::Sender<Revision>,
    /// Set by `close`; watchers end once they have delivered everything published.
    closed: AtomicBool,
}

impl Shared {
    pub(super) fn new(state: State) -> Shared {
        let revision = state.revision;
        Shared {
            state: RwLock::new(state),
            notify: watch::Sender::new(revision),
            closed: AtomicBool::new(false),
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the store closed and wakes every watcher so it can end.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify.send_modify(|_| {});
    }
}
