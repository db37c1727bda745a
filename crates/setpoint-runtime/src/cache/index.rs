//! One user-defined index of a cache: an [`IndexFn`] mapping each object to the values it is
//! filed under (a node name, an owner UID…), and the keys filed under each value.
//!
//! Index functions must be deterministic — the same object always yields the same values —
//! because an object is unfiled by calling the function again on the cached (old) object.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::ObjectKey;

/// Computes the values an object is indexed under (none: the object is not in the index).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// An index: its function and, for each value, the keys of the objects filed under it.
pub(crate) struct Index<K> {
    func: IndexFn<K>,
    /// Value → keys of the cached objects for which `func` returned that value. No empty sets:
    /// a value whose last key goes is removed.
    entries: HashMap<String, BTreeSet<ObjectKey>>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Index {
            func: self.func.clone(),
            entries: self.entries.clone(),
        }
    }
}

impl<K> Index<K> {
    /// An index of `objects` by `func`.
    pub(crate) fn build(func: IndexFn<K>, objects: &BTreeMap<ObjectKey, Arc<K>>) -> Index<K> {
        let mut index = Index {
            func,
            entries: HashMap::new(),
        };
        for (key, object) in objects {
            index.insert(key, object);
        }
        index
    }

    /// The function, to build the same index over another set of objects.
    pub(crate) fn func(&self) -> &IndexFn<K> {
        &self.func
    }

    /// Files `key` under every value of `object`.
    pub(crate) fn insert(&mut self, key: &ObjectKey, object: &K) {
        for value in (self.func)(object) {
            self.entries.entry(value).or_default().insert(key.clone());
        }
    }

    /// Unfiles `key` from every value of `object` (the object as it was filed).
    pub(crate) fn remove(&mut self, key: &ObjectKey, object: &K) {
        for value in (self.func)(object) {
            if let Some(keys) = self.entries.get_mut(&value) {
                keys.remove(key);
                if keys.is_empty() {
                    self.entries.remove(&value);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_first_char() -> IndexFn<String> {
        Arc::new(|s: &String| s.chars().next().map(String::from).into_iter().collect())
    }

    #[test]
    fn index_should_file_and_unfile_keys_and_drop_empty_values() {
        let mut objects = BTreeMap::new();
        objects.insert(ObjectKey::cluster("a1"), Arc::new("apple".to_string()));
        objects.insert(ObjectKey::cluster("a2"), Arc::new("avocado".to_string()));
        objects.insert(ObjectKey::cluster("b1"), Arc::new("banana".to_string()));
        let mut index = Index::build(by_first_char(), &objects);
        assert_eq!(index.keys("a").count(), 2);
        assert_eq!(index.keys("b").count(), 1);
        index.remove(&ObjectKey::cluster("b1"), &"banana".to_string());
        assert_eq!(index.keys("b").count(), 0);
        assert_eq!(index.values(), 1, "the emptied value is gone");
    }
}
