//! One user-defined index of a cache: an [`IndexFn`] mapping each object to the values it is
//! filed under (a node name, an owner UID…), and the keys filed under each value.
//!
//! The values an object was filed under are kept with its key, so unfiling never calls the
//! function again (nor decodes a compact object to call it on).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::ObjectKey;

/// Computes the values an object is indexed under (none: the object is not in the index).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// An index: its function and, for each value, the keys of the objects filed under it.
pub(crate) struct Index<K> {
    func: IndexFn<K>,
    /// Value → keys of the cached objects filed under it. No empty sets: a value whose last
    /// key goes is removed.
    entries: HashMap<String, BTreeSet<ObjectKey>>,
    /// Key → the values it is filed under: exactly the keys in `entries`' sets, each with the
    /// values whose sets hold it. Keys filed under no value are absent.
    filed: HashMap<ObjectKey, Box<[String]>>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Index {
            func: self.func.clone(),
            entries: self.entries.clone(),
            filed: self.filed.clone(),
        }
    }
}

impl<K> Index<K> {
    /// An empty index by `func`.
    pub(crate) fn new(func: IndexFn<K>) -> Index<K> {
        Index {
            func,
            entries: HashMap::new(),
            filed: HashMap::new(),
        }
    }

    /// An index of `objects` by `func`.
    pub(crate) fn build<'a>(
        func: IndexFn<K>,
        objects: impl IntoIterator<Item = (&'a ObjectKey, &'a K)>,
    ) -> Index<K>
    where
        K: 'a,
    {
        let mut index = Index::new(func);
        for (key, object) in objects {
            index.insert(key, object);
        }
        index
    }

    /// The function, to build the same index over another set of objects.
    pub(crate) fn func(&self) -> &IndexFn<K> {
        &self.func
    }

    /// Files `key` under every value of `object`, unfiling it first from the values it was
    /// filed under.
    pub(crate) fn insert(&mut self, key: &ObjectKey, object: &K) {
        self.remove(key);
        let mut values = (self.func)(object);
        values.sort_unstable();
        values.dedup();
        if values.is_empty() {
            return;
        }
        for value in &values {
            self.entries
                .entry(value.clone())
                .or_default()
                .insert(key.clone());
        }
        self.filed.insert(key.clone(), values.into_boxed_slice());
    }

    /// Unfiles `key` from every value it is filed under.
    pub(crate) fn remove(&mut self, key: &ObjectKey) {
        let Some(values) = self.filed.remove(key) else {
            return;
        };
        for value in values.iter() {
            if let Some(keys) = self.entries.get_mut(value) {
                keys.remove(key);
                if keys.is_empty() {
                    self.entries.remove(value);
                }
            }
        }
    }

    /// The keys filed under `value`, in key order.
    pub(crate) fn keys(&self, value: &str) -> impl Iterator<Item = &ObjectKey> {
        self.entries.get(value).into_iter().flatten()
    }

    /// How many values have at least one key (for tests).
    #[cfg(test)]
    pub(crate) fn values(&self) -> usize {
        self.entries.len()
    }

    /// Checks that `entries` and `filed` agree (for tests).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut pairs = 0;
        for (key, values) in &self.filed {
            assert!(!values.is_empty(), "{key} filed under no value");
            for value in values.iter() {
                assert!(
                    self.entries
                        .get(value)
                        .is_some_and(|keys| keys.contains(key)),
                    "{key} not under {value}"
                );
            }
            pairs += values.len();
        }
        let listed: usize = self.entries.values().map(BTreeSet::len).sum();
        assert_eq!(pairs, listed, "entries file keys that filed does not");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_first_char() -> IndexFn<String> {
        Arc::new(|s: &String| s.chars().next().map(String::from).into_iter().collect())
    }

    #[test]
    fn index_should_file_and_unfile_keys_and_drop_empty_values() {
        let objects = [
            (ObjectKey::cluster("a1"), "apple".to_string()),
            (ObjectKey::cluster("a2"), "avocado".to_string()),
            (ObjectKey::cluster("b1"), "banana".to_string()),
        ];
        let mut index = Index::build(by_first_char(), objects.iter().map(|(k, o)| (k, o)));
        assert_eq!(index.keys("a").count(), 2);
        assert_eq!(index.keys("b").count(), 1);
        index.remove(&ObjectKey::cluster("b1"));
        assert_eq!(index.keys("b").count(), 0);
        assert_eq!(index.values(), 1, "the emptied value is gone");
        // Refiled under a new value: the old one is left.
        index.insert(&ObjectKey::cluster("a2"), &"cherry".to_string());
        assert_eq!(index.keys("a").count(), 1);
        assert_eq!(index.keys("c").count(), 1);
        index.check_invariants();
    }
}
