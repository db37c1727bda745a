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
    last: parking_lot::Mutex<Last<T>>,
}

/// The values last compiled and the objects they were compiled from.
struct Last<T> {
    from: Vec<Arc<CachedObject>>,
    values: Arc<Vec<T>>,
}

impl<T> Default for Compiled<T> {
    fn default() -> Self {
        Compiled {
            last: parking_lot::Mutex::new(Last {
                from: Vec::new(),
                values: Arc::new(Vec::new()),
            }),
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
        let unchanged = last.from.len() == objects.len()
            && last
                .from
                .iter()
                .zip(objects.values())
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if !unchanged {
            let values = objects
                .values()
                .filter_map(|o| serde_json::from_slice::<Value>(&o.json.bytes()).ok())
                .flat_map(|v| compile(&v))
                .collect();
            *last = Last {
                from: objects.values().cloned().collect(),
                values: Arc::new(values),
            };
        }
        last.values.clone()
    }
}
