//! The core of the work queue: a FIFO of keys with client-go's dirty and processing sets.
//!
//! A key added many times before a worker takes it is processed once; a key re-added while a
//! worker holds it is processed again after that worker is done; a key is never handed out
//! while a worker holds it. Synchronous and lock-free itself: the caller serialises access
//! and supplies the time.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// What [`Queue::add`] did with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Added {
    /// The key was not waiting and is now at the back of the order.
    Queued,
    /// The key was already waiting; nothing changed.
    Coalesced,
    /// A worker holds the key; it is marked dirty and queued when that worker is done.
    Deferred,
}

/// What [`Queue::release`] does with a key that was re-added while it was held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnRelease {
    /// Queue it again (normal operation).
    Requeue,
    /// Forget the re-add (the queue is shutting down and takes no new work).
    Discard,
}

/// The dedup/processing core. See the module docs for its guarantees.
#[derive(Debug)]
pub(crate) struct Queue<K> {
    /// Keys in the order they will be handed out. Each is in `dirty` and not in `processing`,
    /// and appears at most once.
    order: VecDeque<K>,
    /// Keys waiting to be processed, including ones re-added while processing, each with the
    /// time it was first added since it was last handed out (where queue latency starts).
    /// A key in `dirty` but not in `order` is in `processing`.
    dirty: HashMap<K, Instant>,
    /// Keys a worker holds and has not yet released, each with the time it was handed out.
    processing: HashMap<K, Instant>,
}

impl<K: Clone + Eq + Hash> Queue<K> {
    /// An empty queue.
    pub(crate) fn new() -> Self {
        Self {
            order: VecDeque::new(),
            dirty: HashMap::new(),
            processing: HashMap::new(),
        }
    }

    /// Marks `key` as needing processing at `now`.
    pub(crate) fn add(&mut self, key: K, now: Instant) -> Added {
        let added = match self.dirty.entry(key) {
            Entry::Occupied(_) => Added::Coalesced,
            Entry::Vacant(slot) => {
                if self.processing.contains_key(slot.key()) {
                    slot.insert(now);
                    Added::Deferred
                } else {
                    let key = slot.key().clone();
                    slot.insert(now);
                    self.order.push_back(key);
                    Added::Queued
                }
            }
        };
        self.check_invariants();
        added
    }

    /// Hands out the next key, marking it as processing from `now`, with how long it waited.
    pub(crate) fn pop(&mut self, now: Instant) -> Option<(K, Duration)> {
        let key = self.order.pop_front()?;
        let entry = self.dirty.remove_entry(&key);
        debug_assert!(entry.is_some(), "a queued key is always dirty");
        let (owned, added_at) = entry.unwrap_or_else(|| (key.clone(), now));
        self.processing.insert(owned, now);
        self.check_invariants();
        Some((key, now.saturating_duration_since(added_at)))
    }

    /// Releases a key a worker held, returning how long it was held (`None` if it was not).
    /// A key re-added meanwhile is queued again or discarded, as `on_release` says; returns
    /// whether it was queued again.
    pub(crate) fn release(
        &mut self,
        key: &K,
        now: Instant,
        on_release: OnRelease,
    ) -> (Option<Duration>, bool) {
        let held = self
            .processing
            .remove(key)
            .map(|since| now.saturating_duration_since(since));
        let mut requeued = false;
        if held.is_some() && self.dirty.contains_key(key) {
            match on_release {
                OnRelease::Requeue => {
                    self.order.push_back(key.clone());
                    requeued = true;
                }
                OnRelease::Discard => {
                    self.dirty.remove(key);
                }
            }
        }
        self.check_invariants();
        (held, requeued)
    }

    /// Whether `key` is waiting to be processed (queued, or re-added while held).
    pub(crate) fn is_dirty(&self, key: &K) -> bool {
        self.dirty.contains_key(key)
    }

    /// Keys ready to hand out now.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Keys waiting to be processed, including re-adds deferred behind a worker (client-go's
    /// depth gauge).
    pub(crate) fn depth(&self) -> usize {
        self.dirty.len()
    }

    /// Keys workers hold.
    pub(crate) fn in_flight(&self) -> usize {
        self.processing.len()
    }

    /// Sum of, and longest, time the held keys have been held at `now`.
    pub(crate) fn held_for(&self, now: Instant) -> (Duration, Duration) {
        self.processing
            .values()
            .map(|since| now.saturating_duration_since(*since))
            .fold((Duration::ZERO, Duration::ZERO), |(sum, max), age| {
                (sum + age, max.max(age))
            })
    }

    /// Panics if the invariants on the fields do not hold. Cheap checks always; the full scan
    /// only for small queues, so debug builds stay linear.
    #[cfg(any(test, debug_assertions))]
    pub(crate) fn check_invariants(&self) {
        assert!(
            self.order.len() <= self.dirty.len(),
            "order longer than dirty"
        );
        assert!(
            self.dirty.len() - self.order.len() <= self.processing.len(),
            "more dirty keys missing from order than keys in processing"
        );
        if self.order.len() > 64 {
            return;
        }
        let mut seen = std::collections::HashSet::new();
        for key in &self.order {
            assert!(self.dirty.contains_key(key), "queued key not dirty");
            assert!(
                !self.processing.contains_key(key),
                "queued key is processing"
            );
            assert!(seen.insert(key), "key queued twice");
        }
        for key in self.dirty.keys() {
            assert!(
                seen.contains(key) || self.processing.contains_key(key),
                "dirty key neither queued nor processing"
            );
        }
    }

    #[cfg(not(any(test, debug_assertions)))]
    #[inline]
    pub(crate) fn check_invariants(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn queue_should_coalesce_adds_before_a_worker_takes_the_key() {
        let now = t0();
        let mut q = Queue::new();
        assert_eq!(q.add("a", now), Added::Queued);
        assert_eq!(q.add("a", now), Added::Coalesced);
        assert_eq!(q.add("b", now), Added::Queued);
        assert_eq!(q.pop(now).map(|(k, _)| k), Some("a"));
        assert_eq!(q.pop(now).map(|(k, _)| k), Some("b"));
        assert_eq!(q.pop(now), None);
        q.check_invariants();
    }

    #[test]
    fn queue_should_defer_key_readded_while_processing() {
        let now = t0();
        let mut q = Queue::new();
        q.add("a", now);
        let (a, _) = q.pop(now).unwrap();
        assert_eq!(q.add(a, now), Added::Deferred);
        assert_eq!(q.add(a, now), Added::Coalesced);
        assert_eq!(q.len(), 0, "a held key is never handed out");
        assert_eq!(q.depth(), 1);
        assert_eq!(
            q.release(&a, now, OnRelease::Requeue),
            (Some(Duration::ZERO), true)
        );
        assert_eq!(q.pop(now).map(|(k, _)| k), Some("a"));
        assert_eq!(
            q.release(&a, now, OnRelease::Requeue),
            (Some(Duration::ZERO), false)
        );
        assert_eq!(q.depth(), 0);
        q.check_invariants();
    }

    #[test]
    fn queue_should_discard_deferred_readd_when_told_to() {
        let now = t0();
        let mut q = Queue::new();
        q.add("a", now);
        q.pop(now);
        q.add("a", now);
        assert_eq!(
            q.release(&"a", now, OnRelease::Discard),
            (Some(Duration::ZERO), false)
        );
        assert_eq!((q.len(), q.depth(), q.in_flight()), (0, 0, 0));
        q.check_invariants();
    }

    #[test]
    fn queue_should_report_wait_and_hold_times() {
        let start = t0();
        let mut q = Queue::new();
        q.add("a", start);
        let later = start + Duration::from_millis(7);
        assert_eq!(q.pop(later), Some(("a", Duration::from_millis(7))));
        let end = later + Duration::from_millis(3);
        assert_eq!(
            q.held_for(end),
            (Duration::from_millis(3), Duration::from_millis(3))
        );
        assert_eq!(
            q.release(&"a", end, OnRelease::Requeue).0,
            Some(Duration::from_millis(3))
        );
    }

    #[test]
    fn queue_should_ignore_release_of_a_key_not_held() {
        let now = t0();
        let mut q = Queue::new();
        q.add("a", now);
        assert_eq!(q.release(&"a", now, OnRelease::Requeue), (None, false));
        assert_eq!(q.len(), 1);
        q.check_invariants();
    }
}
