//! [`Claim`]: a worker's exclusive hold on one key, finished exactly once.
//!
//! Finishing is the only way to let go, and every way of finishing says what happened, so
//! client-go's "remember to call `Done`" and "remember to call `Forget`" cannot be forgotten:
//! [`done`](Claim::done) clears the key's backoff, [`retry`](Claim::retry) backs it off, and
//! dropping a claim unfinished — a reconcile that panicked or was cancelled — counts as a
//! failure and retries the key with backoff.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use super::work_queue::Shared;

/// How a claim was finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Success: forget the key's failures.
    Done,
    /// Failure: requeue after the key's backoff (and the overall bucket).
    Retry,
    /// Requeue after exactly this long; the key's failures are left as they are.
    RetryAfter(Duration),
}

/// A worker's exclusive hold on one key, from [`WorkQueue::next`](super::WorkQueue::next).
///
/// While it exists no other worker is handed the key; adds of the key meanwhile are
/// processed once after it is finished. Dropping it unfinished retries the key with backoff.
#[must_use = "dropping a claim retries its key with backoff; call done() on success"]
pub struct Claim<K: Clone + Eq + Hash> {
    shared: Arc<Shared<K>>,
    key: K,
    /// Whether a finishing method has run; if not, `drop` retries.
    finished: bool,
}

impl<K: Clone + Eq + Hash + std::fmt::Debug> std::fmt::Debug for Claim<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash> Claim<K> {
    pub(crate) fn new(shared: Arc<Shared<K>>, key: K) -> Self {
        Self {
            shared,
            key,
            finished: false,
        }
    }

    /// The claimed key.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// How many times in a row the key has failed before this claim (0 on a first attempt or
    /// after a success).
    pub fn failures(&self) -> u32 {
        self.shared.failures(&self.key)
    }

    /// Success: releases the key and clears its backoff.
    pub fn done(mut self) {
        self.finish(Outcome::Done);
    }

    /// Failure: releases the key and requeues it after its backoff (and the overall token
    /// bucket). The same as dropping the claim.
    pub fn retry(mut self) {
        self.finish(Outcome::Retry);
    }

    /// Releases the key and requeues it after `delay` (a key already queued meanwhile is not
    /// delayed). Leaves the key's backoff as it is.
    pub fn retry_after(mut self, delay: Duration) {
        self.finish(Outcome::RetryAfter(delay));
    }

    fn finish(&mut self, outcome: Outcome) {
        if !self.finished {
            self.finished = true;
            self.shared.finish(&self.key, outcome);
        }
    }
}

impl<K: Clone + Eq + Hash> Drop for Claim<K> {
    fn drop(&mut self) {
        self.finish(Outcome::Retry);
    }
}
