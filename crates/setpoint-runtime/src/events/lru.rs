//! A map with a size cap that forgets the least recently used entry when full: what keeps the
//! recorder's aggregation cache and spam filter bounded however many objects it sees.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// A capped map. Every `get_mut` and `insert` counts as a use.
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    /// Entries with the tick of their last use. Each tick is also a key of `order`.
    entries: HashMap<K, (V, u64)>,
    /// Last-use tick → key, oldest first. Same size as `entries`.
    order: BTreeMap<u64, K>,
    /// The next tick to hand out.
    tick: u64,
    /// At most this many entries (at least one).
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V> Lru<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Lru {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            capacity: capacity.max(1),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The value for `key`, marked as just used.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let tick = self.next_tick();
        let (value, used) = self.entries.get_mut(key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, key.clone());
        Some(value)
    }

    /// The value for `key`, without counting as a use.
    pub(crate) fn peek(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }

    /// Inserts or replaces `key`; returns the entry evicted to make room, if any.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        let tick = self.next_tick();
        if let Some((_, used)) = self.entries.insert(key.clone(), (value, tick)) {
            self.order.remove(&used);
            self.order.insert(tick, key);
            return None;
        }
        self.order.insert(tick, key);
        if self.entries.len() <= self.capacity {
            return None;
        }
        let (_, oldest) = self.order.pop_first()?;
        let (value, _) = self.entries.remove(&oldest)?;
        Some((oldest, value))
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let (value, used) = self.entries.remove(key)?;
        self.order.remove(&used);
        Some(value)
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        assert_eq!(self.entries.len(), self.order.len());
        assert!(self.entries.len() <= self.capacity);
        for (tick, key) in &self.order {
            assert_eq!(self.entries.get(key).map(|(_, t)| t), Some(tick));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_should_evict_the_least_recently_used_entry() {
        let mut lru = Lru::new(2);
        assert!(lru.insert("a", 1).is_none());
        assert!(lru.insert("b", 2).is_none());
        *lru.get_mut(&"a").expect("a") += 10;
        assert_eq!(lru.insert("c", 3), Some(("b", 2)));
        lru.check_invariants();
        assert_eq!(lru.peek(&"a"), Some(&11));
        assert_eq!(lru.peek(&"b"), None);
        assert_eq!(lru.len(), 2);
    }

    #[test]
    fn lru_should_replace_without_evicting_and_forget_removed_keys() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        assert!(lru.insert("a", 5).is_none());
        assert_eq!(lru.remove(&"b"), Some(2));
        assert!(lru.insert("c", 3).is_none());
        lru.check_invariants();
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.insert("d", 4), Some(("a", 5)));
        lru.check_invariants();
    }
}
