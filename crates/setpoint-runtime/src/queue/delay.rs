//! Keys waiting for a time: the timer heap behind [`WorkQueue::add_after`](super::WorkQueue::add_after).
//!
//! A key waits at most once: waiting again keeps the earlier time. Driven by the caller's
//! clock (tokio time), with no task of its own: the queue moves due keys out whenever it is
//! touched, and idle workers sleep until [`Delays::next_deadline`].

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

use tokio::time::Instant;

/// One heap entry; ordered by time, then by insertion.
#[derive(Debug)]
struct Entry<K> {
    at: Instant,
    seq: u64,
    key: K,
}

impl<K> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<K> Eq for Entry<K> {}
impl<K> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Keys waiting for a time.
#[derive(Debug)]
pub(crate) struct Delays<K> {
    /// Min-heap of entries. An entry is live iff `waiting` maps its key to its time; others
    /// are stale (superseded or cancelled) and skipped when they reach the top.
    heap: BinaryHeap<Reverse<Entry<K>>>,
    /// The time each waiting key is due. Every key here has a live entry in `heap`.
    waiting: HashMap<K, Instant>,
    /// Insertion counter, so equal times come out in insertion order.
    seq: u64,
}

impl<K: Clone + Eq + Hash> Delays<K> {
    /// No key waiting.
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            waiting: HashMap::new(),
            seq: 0,
        }
    }

    /// Makes `key` due at `at`, unless it is already due sooner. Returns whether `at` is now
    /// the earliest deadline of all (so sleepers should recompute theirs).
    pub(crate) fn insert(&mut self, key: K, at: Instant) -> bool {
        if let Some(current) = self.waiting.get(&key) {
            if *current <= at {
                return false;
            }
        }
        let earliest = self.next_deadline().is_none_or(|next| at < next);
        self.waiting.insert(key.clone(), at);
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            key,
        }));
        if self.heap.len() > 2 * self.waiting.len() + 64 {
            self.compact();
        }
        self.check_invariants();
        earliest
    }

    /// Stops `key` waiting, if it was.
    pub(crate) fn cancel(&mut self, key: &K) {
        if !self.waiting.is_empty() {
            self.waiting.remove(key);
        }
    }

    /// Removes and returns a key due at or before `now`, earliest first.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<K> {
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.at > now {
                return None;
            }
            let Reverse(entry) = self.heap.pop()?;
            if self.waiting.get(&entry.key) == Some(&entry.at) {
                self.waiting.remove(&entry.key);
                return Some(entry.key);
            }
        }
        None
    }

    /// When the earliest waiting key is due.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse(top)) = self.heap.peek() {
            if self.waiting.get(&top.key) == Some(&top.at) {
                return Some(top.at);
            }
            self.heap.pop();
        }
        None
    }

    /// Keys waiting.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Stops every key waiting.
    pub(crate) fn clear(&mut self) {
        self.heap.clear();
        self.waiting.clear();
    }

    /// Drops stale entries.
    fn compact(&mut self) {
        let waiting = &self.waiting;
        self.heap
            .retain(|Reverse(entry)| waiting.get(&entry.key) == Some(&entry.at));
    }

    /// Panics if the invariants on the fields do not hold.
    #[cfg(any(test, debug_assertions))]
    pub(crate) fn check_invariants(&self) {
        assert!(
            self.heap.len() >= self.waiting.len(),
            "waiting key without heap entry"
        );
        if self.heap.len() <= 64 {
            for (key, at) in &self.waiting {
                assert!(
                    self.heap
                        .iter()
                        .any(|Reverse(e)| e.key == *key && e.at == *at),
                    "waiting key without a live heap entry"
                );
            }
        }
    }

    #[cfg(not(any(test, debug_assertions)))]
    #[inline]
    pub(crate) fn check_invariants(&self) {}
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn delays_should_release_keys_in_time_order_once_due() {
        let t = Instant::now();
        let mut d = Delays::new();
        assert!(d.insert("b", t + ms(20)));
        assert!(d.insert("a", t + ms(10)));
        assert_eq!(d.pop_due(t + ms(5)), None);
        assert_eq!(d.next_deadline(), Some(t + ms(10)));
        assert_eq!(d.pop_due(t + ms(30)), Some("a"));
        assert_eq!(d.pop_due(t + ms(30)), Some("b"));
        assert_eq!(d.pop_due(t + ms(30)), None);
        d.check_invariants();
    }

    #[test]
    fn delays_should_keep_the_earliest_time_for_a_key_waiting_twice() {
        let t = Instant::now();
        let mut d = Delays::new();
        d.insert("a", t + ms(10));
        assert!(!d.insert("a", t + ms(50)), "a later time changes nothing");
        assert_eq!(d.pop_due(t + ms(10)), Some("a"));
        assert_eq!(
            d.pop_due(t + ms(60)),
            None,
            "the later time did not add a second wait"
        );

        d.insert("a", t + ms(50));
        assert!(d.insert("a", t + ms(20)), "a sooner time wins");
        assert_eq!(d.pop_due(t + ms(20)), Some("a"));
        assert_eq!(d.pop_due(t + ms(60)), None, "the superseded entry is stale");
        assert_eq!(d.len(), 0);
        d.check_invariants();
    }

    #[test]
    fn delays_should_forget_a_cancelled_key() {
        let t = Instant::now();
        let mut d = Delays::new();
        d.insert("a", t + ms(10));
        d.cancel(&"a");
        assert_eq!(d.next_deadline(), None);
        assert_eq!(d.pop_due(t + ms(10)), None);
        d.check_invariants();
    }

    #[test]
    fn delays_should_compact_stale_entries() {
        let t = Instant::now();
        let mut d = Delays::new();
        for i in 0..1_000u64 {
            d.insert("a", t + ms(10_000 - i));
        }
        assert!(d.heap.len() <= 2 * d.len() + 65);
        assert_eq!(d.pop_due(t + ms(10_000)), Some("a"));
        assert_eq!(d.pop_due(t + ms(10_000)), None);
    }
}
