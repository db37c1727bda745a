//! [`Recent`]: a compact cache's few decoded objects, kept so that repeated reads of the same
//! object decode it once. Bounded (a CLOCK: each entry has a "used" bit that a hit sets and
//! the sweeping hand clears; the hand evicts the first entry it finds unused).
//!
//! Entries are keyed by the *stamp* of the cached version they decode, never by object key:
//! a write gives the object a new stamp, so a decoded copy of an older version can never be
//! returned for a newer one, even if a reader inserts it after the write.

use std::collections::HashMap;
use std::sync::Arc;

/// Up to `capacity` decoded objects by stamp.
pub(crate) struct Recent<K> {
    capacity: usize,
    /// Stamp → position in `slots`. Exactly the stamps in `slots`.
    positions: HashMap<u64, usize>,
    /// The entries; never more than `capacity`.
    slots: Vec<Slot<K>>,
    /// Where the next eviction search starts.
    hand: usize,
}

struct Slot<K> {
    stamp: u64,
    object: Arc<K>,
    /// Read since the hand last passed.
    used: bool,
}

impl<K> Recent<K> {
    /// An empty cache of at most `capacity` objects (0: keeps nothing).
    pub(crate) fn new(capacity: usize) -> Recent<K> {
        Recent {
            capacity,
            positions: HashMap::new(),
            slots: Vec::new(),
            hand: 0,
        }
    }

    /// How many objects it keeps at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The object decoded for `stamp`, if kept; marks it used.
    pub(crate) fn get(&mut self, stamp: u64) -> Option<Arc<K>> {
        let at = *self.positions.get(&stamp)?;
        let slot = &mut self.slots[at];
        slot.used = true;
        Some(slot.object.clone())
    }

    /// Keeps `object` as the decoded `stamp`, evicting an entry if full.
    pub(crate) fn insert(&mut self, stamp: u64, object: Arc<K>) {
        if self.capacity == 0 {
            return;
        }
        if let Some(&at) = self.positions.get(&stamp) {
            self.slots[at].object = object;
            return;
        }
        let slot = Slot {
            stamp,
            object,
            used: false,
        };
        if self.slots.len() < self.capacity {
            self.positions.insert(stamp, self.slots.len());
            self.slots.push(slot);
            return;
        }
        // Full: sweep, clearing used bits, to the first unused entry (at most one full turn
        // clears them all, so the second turn finds one).
        loop {
            let at = self.hand;
            self.hand = (self.hand + 1) % self.slots.len();
            let candidate = &mut self.slots[at];
            if candidate.used {
                candidate.used = false;
                continue;
            }
            self.positions.remove(&candidate.stamp);
            self.positions.insert(stamp, at);
            *candidate = slot;
            return;
        }
    }

    /// Drops the object decoded for `stamp` (a version that was replaced or removed).
    pub(crate) fn remove(&mut self, stamp: u64) {
        let Some(at) = self.positions.remove(&stamp) else {
            return;
        };
        self.slots.swap_remove(at);
        if let Some(moved) = self.slots.get(at) {
            self.positions.insert(moved.stamp, at);
        }
        if self.hand >= self.slots.len() {
            self.hand = 0;
        }
    }

    /// How many objects are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_should_evict_unused_entries_before_used_ones() {
        let mut recent = Recent::new(3);
        for stamp in 1..=3 {
            recent.insert(stamp, Arc::new(stamp));
        }
        assert_eq!(recent.get(1).as_deref(), Some(&1));
        assert_eq!(recent.get(3).as_deref(), Some(&3));
        recent.insert(4, Arc::new(4));
        assert_eq!(recent.len(), 3);
        assert_eq!(recent.get(2), None, "the one entry not read since went");
        assert!(recent.get(1).is_some() && recent.get(3).is_some() && recent.get(4).is_some());
    }

    #[test]
    fn recent_should_forget_removed_stamps_and_keep_positions_consistent() {
        let mut recent = Recent::new(4);
        for stamp in 1..=4 {
            recent.insert(stamp, Arc::new(stamp * 10));
        }
        recent.remove(2);
        recent.remove(9);
        assert_eq!(recent.get(2), None);
        assert_eq!(
            recent.get(4).as_deref(),
            Some(&40),
            "the moved entry is still found"
        );
        recent.insert(5, Arc::new(50));
        recent.insert(6, Arc::new(60));
        assert_eq!(recent.len(), 4);
        for (stamp, at) in &recent.positions {
            assert_eq!(recent.slots[*at].stamp, *stamp);
        }
    }

    #[test]
    fn recent_should_keep_nothing_at_capacity_zero() {
        let mut recent = Recent::new(0);
        recent.insert(1, Arc::new(1));
        assert_eq!(recent.get(1), None);
    }
}
