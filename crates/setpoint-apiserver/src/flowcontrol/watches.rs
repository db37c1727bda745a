//! The cap on watches per user: each user (by name) may hold at most
//! `--max-watches-per-user` open watches; one more is refused with `429` and a message saying
//! so. A watch counts from its admission until its response body is dropped (the stream ended
//! or the client went away). Users in `system:masters` are not capped. Zero: no cap.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Open watches by user name.
#[derive(Debug, Default)]
pub(crate) struct WatchCounts {
    open: Mutex<HashMap<String, usize>>,
}

/// One open watch of a user; taken off the count when dropped.
#[derive(Debug)]
pub(crate) struct OpenWatch {
    counts: Arc<WatchCounts>,
    user: String,
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock();
        if let Some(n) = open.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}

impl WatchCounts {
    /// Counts a new watch of `user` if it has fewer than `cap` open; `None` if it has `cap`.
    pub(crate) fn open(self: &Arc<Self>, user: &str, cap: usize) -> Option<OpenWatch> {
        let mut open = self.open.lock();
        let n = open.entry(user.to_owned()).or_default();
        if cap > 0 && *n >= cap {
            return None;
        }
        *n += 1;
        Some(OpenWatch {
            counts: self.clone(),
            user: user.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_should_get_its_watches_back_when_they_close() {
        let counts = Arc::new(WatchCounts::default());
        let a = counts.open("alice", 2).unwrap();
        let _b = counts.open("alice", 2).unwrap();
        assert!(counts.open("alice", 2).is_none());
        assert!(counts.open("bob", 2).is_some());
        drop(a);
        assert!(counts.open("alice", 2).is_some());
    }
}
