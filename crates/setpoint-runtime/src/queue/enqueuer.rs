//! [`Enqueuer`]: the add-only handle event handlers get, so a handler cannot claim, finish
//! or shut down anything.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use super::work_queue::Shared;

/// A handle that can only add keys to a [`WorkQueue`](super::WorkQueue). Cheap to clone.
pub struct Enqueuer<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Enqueuer<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> std::fmt::Debug for Enqueuer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enqueuer").finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Enqueuer<K> {
    pub(crate) fn new(shared: Arc<Shared<K>>) -> Self {
        Self { shared }
    }

    /// As [`WorkQueue::add`](super::WorkQueue::add).
    pub fn add(&self, key: K) {
        self.shared.add(key);
    }

    /// As [`WorkQueue::add_after`](super::WorkQueue::add_after).
    pub fn add_after(&self, key: K, delay: Duration) {
        self.shared.add_after(key, delay);
    }

    /// Whether the queue has shut down (adds are then discarded).
    pub fn is_shut_down(&self) -> bool {
        self.shared.is_shut_down()
    }
}
