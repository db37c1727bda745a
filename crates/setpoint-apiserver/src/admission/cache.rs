//! What admission compiles from a kind's stored objects (webhook configurations, policies,
//! bindings), kept until one of them changes: the objects come from the kind's watch cache,
//! which follows the store within milliseconds, and are compiled again only when the cache's
//! objects are not the ones last compiled (the cached objects are held, so comparing their
//! pointers tells).

use std::sync::Arc;

use serde_json::Value;

use crate::watchcache::{CachedObject, WatchCache};

/// The values compiled from one kind's objects, in name order.
pub(crate) struct Compiled<T> {
    last: parking_lot::Mutex<(Vec<Arc<CachedObject>>, Arc<Vec<T>>)>,
}

impl<T> Default for Compiled<T> {
    fn default() -> Self {
        Compiled {
            last: parking_lot::Mutex::new((Vec::new(), Arc::new(Vec::new()))),
        }
    }
}

impl<T> Compiled<T> {
    /// The values of the objects in `cache` now: those last compiled if no object changed,
    /// else `compile` of each object (an object may give several values, or none).
    pub(crate) fn get(
        &self,
        cache: &WatchCache,
        compile: impl Fn(&Value) -> Vec<T>,
    ) -> Arc<Vec<T>> {
        let (objects, _) = cache.snapshot();
        let mut last = self.last.lock();
        let unchanged = last.0.len() == objects.len()
            && last
                .0
                .iter()
                .zip(objects.values())
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if !unchanged {
            let values = objects
                .values()
                .filter_map(|o| serde_json::from_slice::<Value>(&o.json).ok())
                .flat_map(|v| compile(&v))
                .collect();
            *last = (objects.values().cloned().collect(), Arc::new(values));
        }
        last.1.clone()
    }
}
