//! [`ObjectCache`]: the read handle on an informer's indexed cache, and the writer methods the
//! informer applies watch events with.
//!
//! Objects are held once, in a map ordered by [`ObjectKey`] (namespace, then name): that order
//! is the built-in namespace index — a namespace's objects are one range of the map. Each is
//! a [`Slot`]: the `Arc<K>` itself, or, in the compact [`CacheForm`], its encoded bytes with the
//! labels and resource version reads filter on. User indexes ([`IndexFn`]) file keys, never
//! copies of objects, and are computed when an object is cached, so no read decodes an object
//! just to filter it out.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use kube::Resource;
use parking_lot::{Mutex, RwLock};
use setpoint_core::LabelSelector;
use tokio::sync::watch;

use super::form::{CacheForm, Codec};
use super::index::{Index, IndexFn};
use super::recent::Recent;
use super::slot::{Packed, Slot};
use crate::ObjectKey;

/// Errors reading an [`ObjectCache`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// No index of this name was added to the cache.
    #[error("the cache has no index named {0:?}")]
    UnknownIndex(String),
}

/// A cloneable read handle on an indexed cache of objects keyed by [`ObjectKey`].
///
/// Readers never see a half-applied relist: a complete list replaces the whole content under
/// one write lock, and every read copies what it returns out under one read lock. Reads return
/// `Arc`s — in the decoded [`CacheForm`] sharing the cached objects, in the compact form
/// decoded for the read (or kept from a recent one); treat them as read-only snapshots (clone
/// the object to modify it).
pub struct ObjectCache<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for ObjectCache<K> {
    fn clone(&self) -> Self {
        ObjectCache {
            shared: self.shared.clone(),
        }
    }
}

impl<K> std::fmt::Debug for ObjectCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state.read();
        f.debug_struct("ObjectCache")
            .field("compact", &self.shared.compact.is_some())
            .field("objects", &state.objects.len())
            .field("indexes", &state.indexes.keys().collect::<Vec<_>>())
            .field("resource_version", &state.resource_version)
            .field("synced", &*self.shared.synced.borrow())
            .finish()
    }
}

struct Shared<K> {
    state: RwLock<State<K>>,
    /// False until the first complete list has been applied; never goes back to false.
    synced: watch::Sender<bool>,
    /// Set in the compact form: new objects are packed.
    compact: Option<Compact<K>>,
}

/// What a compact cache needs besides its content.
struct Compact<K> {
    codec: Codec<K>,
    /// Decoded copies of recently read or written versions, by stamp.
    recent: Mutex<Recent<K>>,
    /// The stamp of the next packed version.
    next_stamp: AtomicU64,
    /// The first packed object was decoded back to check the codec round-trips `K`.
    checked: AtomicBool,
    /// It did not: objects are cached decoded from then on.
    broken: AtomicBool,
}

/// The cache content.
struct State<K> {
    /// Every cached object, by key: the namespace index is this map's order.
    objects: BTreeMap<ObjectKey, Slot<K>>,
    /// User indexes by name. Each indexes exactly the objects in `objects`.
    indexes: HashMap<String, Index<K>>,
    /// The resource version the content is at: the last list's, or the last applied event's.
    resource_version: Option<String>,
}

/// What a complete list replaced, for the informer's notifications.
pub(crate) struct Replaced<K> {
    /// Each listed object, in key order, with the object it replaced (`None`: new). When its
    /// resource version is unchanged, both are the same `Arc`.
    pub(crate) listed: Vec<(Arc<K>, Option<Arc<K>>)>,
    /// The objects cached before and missing from the list, in key order.
    pub(crate) vanished: Vec<Arc<K>>,
}

/// The keys of `namespace`'s objects form this range of the key order.
fn namespace_range(namespace: &str) -> (Bound<ObjectKey>, Bound<ObjectKey>) {
    (
        Bound::Included(ObjectKey::namespaced(namespace, "")),
        Bound::Unbounded,
    )
}

impl<K: Resource> ObjectCache<K> {
    /// The object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let slot = self.shared.state.read().objects.get(key).cloned()?;
        self.shared.object(&slot, true)
    }

    /// Every object, in key order (cluster-scoped first, then by namespace and name).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read(|state| state.objects.values().cloned().collect())
    }

    /// The objects in `namespace`, in name order (the built-in namespace index).
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.read(|state| {
            state
                .objects
                .range(namespace_range(namespace))
                .take_while(|(key, _)| key.namespace.as_deref() == Some(namespace))
                .map(|(_, slot)| slot.clone())
                .collect()
        })
    }

    /// The objects (in `namespace`, or in all namespaces if `None`) whose labels match
    /// `selector`.
    pub fn list_selected(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<K>> {
        self.read(|state| match namespace {
            Some(ns) => state
                .objects
                .range(namespace_range(ns))
                .take_while(|(key, _)| key.namespace.as_deref() == Some(ns))
                .map(|(_, slot)| slot)
                .filter(|slot| slot.matches(selector))
                .cloned()
                .collect(),
            None => state
                .objects
                .values()
                .filter(|slot| slot.matches(selector))
                .cloned()
                .collect(),
        })
    }

    /// The objects filed under `value` in the index named `index`, in key order.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError> {
        let slots: Vec<Slot<K>> = {
            let state = self.shared.state.read();
            let found = state
                .indexes
                .get(index)
                .ok_or_else(|| CacheError::UnknownIndex(index.to_string()))?;
            found
                .keys(value)
                .filter_map(|key| state.objects.get(key).cloned())
                .collect()
        };
        Ok(self.shared.objects(slots))
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.shared.state.read().objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.shared.state.read().objects.is_empty()
    }

    /// Whether the cache holds its objects compact (see [`CacheForm`]).
    pub fn is_compact(&self) -> bool {
        self.shared.compact.is_some()
    }

    /// Whether the first complete list has been applied.
    pub fn is_synced(&self) -> bool {
        *self.shared.synced.borrow()
    }

    /// Resolves once the first complete list has been applied (at once if it already was).
    ///
    /// Cancel-safe: dropping the future has no effect on the cache.
    pub async fn wait_until_synced(&self) {
        let mut synced = self.shared.synced.subscribe();
        // The sender lives in `self.shared`, which this borrow keeps alive: no error possible.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// The resource version the cache is at: that of the last complete list or applied event.
    pub fn resource_version(&self) -> Option<String> {
        self.shared.state.read().resource_version.clone()
    }

    /// The objects of the slots `select` copies out under one read lock, decoded after it.
    fn read(&self, select: impl FnOnce(&State<K>) -> Vec<Slot<K>>) -> Vec<Arc<K>> {
        let slots = select(&self.shared.state.read());
        self.shared.objects(slots)
    }
}

impl<K: Resource> Shared<K> {
    /// The slot to cache `object` in: packed if compact (and the codec works for `K`).
    fn slot(&self, object: &Arc<K>) -> Slot<K> {
        let Some(compact) = &self.compact else {
            return Slot::Decoded(object.clone());
        };
        if compact.broken.load(Ordering::Relaxed) {
            return Slot::Decoded(object.clone());
        }
        let bytes = match compact.codec.encode(object) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(%error, "an object did not encode for the compact cache; it is cached decoded");
                return Slot::Decoded(object.clone());
            }
        };
        if !compact.checked.swap(true, Ordering::Relaxed) {
            if let Err(error) = compact.codec.decode(&bytes) {
                tracing::warn!(%error, "objects do not decode back from the compact form; this cache holds them decoded");
                compact.broken.store(true, Ordering::Relaxed);
                return Slot::Decoded(object.clone());
            }
        }
        let stamp = compact.next_stamp.fetch_add(1, Ordering::Relaxed);
        Slot::Packed(Arc::new(Packed::new(stamp, object.as_ref(), bytes)))
    }

    /// The object in `slot`, from the recent cache or decoded (then kept there if `keep`).
    /// `None` only if a packed object fails to decode, which is logged.
    fn object(&self, slot: &Slot<K>, keep: bool) -> Option<Arc<K>> {
        let packed = match slot {
            Slot::Decoded(object) => return Some(object.clone()),
            Slot::Packed(packed) => packed,
        };
        let compact = self.compact.as_ref()?;
        if let Some(object) = compact.recent.lock().get(packed.stamp) {
            return Some(object);
        }
        match compact.codec.decode(&packed.bytes) {
            Ok(object) => {
                let object = Arc::new(object);
                if keep {
                    compact.recent.lock().insert(packed.stamp, object.clone());
                }
                Some(object)
            }
            Err(error) => {
                tracing::error!(%error, "a cached object failed to decode; reads leave it out");
                None
            }
        }
    }

    /// The objects of `slots`. A read of few objects (at most a quarter of the recent cache)
    /// keeps what it decodes; a bigger one is a scan and would only evict what is hot.
    fn objects(&self, slots: Vec<Slot<K>>) -> Vec<Arc<K>> {
        let keep = self
            .compact
            .as_ref()
            .is_some_and(|c| slots.len() * 4 <= c.recent.lock().capacity());
        slots
            .iter()
            .filter_map(|slot| self.object(slot, keep))
            .collect()
    }

    /// The object that was in `slot`, which the cache no longer holds; its decoded copy is
    /// dropped from the recent cache.
    fn evicted(&self, slot: &Slot<K>) -> Option<Arc<K>> {
        let object = self.object(slot, false);
        self.forget(slot);
        object
    }

    /// Drops `slot`'s decoded copy from the recent cache.
    fn forget(&self, slot: &Slot<K>) {
        if let (Slot::Packed(packed), Some(compact)) = (slot, &self.compact) {
            compact.recent.lock().remove(packed.stamp);
        }
    }
}

/// The writer side, used by the informer that owns the cache (a single writer), and
/// [`ObjectCache::add_index`], which may be called from anywhere.
impl<K: Resource> ObjectCache<K> {
    /// An empty, unsynced cache of decoded objects.
    #[cfg(test)]
    pub(crate) fn new() -> ObjectCache<K> {
        ObjectCache::with_form(&CacheForm::decoded())
    }

    /// An empty, unsynced cache holding objects in `form`.
    pub(crate) fn with_form(form: &CacheForm<K>) -> ObjectCache<K> {
        ObjectCache {
            shared: Arc::new(Shared {
                state: RwLock::new(State {
                    objects: BTreeMap::new(),
                    indexes: HashMap::new(),
                    resource_version: None,
                }),
                synced: watch::Sender::new(false),
                compact: form.compact_parts().map(|(codec, recent)| Compact {
                    codec,
                    recent: Mutex::new(Recent::new(recent)),
                    next_stamp: AtomicU64::new(0),
                    checked: AtomicBool::new(false),
                    broken: AtomicBool::new(false),
                }),
            }),
        }
    }

    /// Adds (or replaces) the index `name`, indexing the objects already cached (which, in
    /// the compact form, decodes each of them once).
    pub(crate) fn add_index(&self, name: &str, func: IndexFn<K>) {
        let mut state = self.shared.state.write();
        let objects: Vec<(&ObjectKey, Arc<K>)> = state
            .objects
            .iter()
            .filter_map(|(key, slot)| Some((key, self.shared.object(slot, false)?)))
            .collect();
        let index = Index::build(func, objects.iter().map(|(k, o)| (*k, o.as_ref())));
        drop(objects);
        state.indexes.insert(name.to_string(), index);
    }

    /// Caches `object` (added or modified), returning the object it replaces. In the compact
    /// form `object` is also kept decoded among the recent ones: what a watch just changed is
    /// what a controller reads next.
    pub(crate) fn apply(&self, object: Arc<K>) -> Option<Arc<K>> {
        let key = ObjectKey::of(object.as_ref());
        let slot = self.shared.slot(&object);
        let old = {
            let mut guard = self.shared.state.write();
            let state = &mut *guard;
            if let Some(rv) = object.meta().resource_version.clone() {
                state.resource_version = Some(rv);
            }
            for index in state.indexes.values_mut() {
                index.insert(&key, &object);
            }
            state.objects.insert(key, slot.clone())
        };
        if let (Slot::Packed(packed), Some(compact)) = (&slot, &self.shared.compact) {
            compact.recent.lock().insert(packed.stamp, object);
        }
        old.and_then(|old| self.shared.evicted(&old))
    }

    /// Removes the object with `key`, saying whether it was cached; `resource_version` is the
    /// deletion's.
    pub(crate) fn remove(&self, key: &ObjectKey, resource_version: Option<String>) -> bool {
        let old = {
            let mut guard = self.shared.state.write();
            let state = &mut *guard;
            if resource_version.is_some() {
                state.resource_version = resource_version;
            }
            let Some(old) = state.objects.remove(key) else {
                return false;
            };
            for index in state.indexes.values_mut() {
                index.remove(key);
            }
            old
        };
        self.shared.forget(&old);
        true
    }

    /// Replaces the whole content with `objects` at `resource_version` and marks the cache
    /// synced, returning what it replaced.
    ///
    /// An object whose resource version equals the cached one's keeps the cached slot (the
    /// new copy is not cached: in the decoded form it is dropped and the cached `Arc` is the
    /// one reported; compact, the cached bytes are kept), so an unchanged object is never
    /// held twice. The replacement and its indexes are built beside the current content, then
    /// swapped in under the write lock: readers see the old set or the new one, never a mix.
    pub(crate) fn replace(&self, objects: Vec<Arc<K>>, resource_version: String) -> Replaced<K> {
        // Key → (slot to cache, object to report, whether the cached slot was kept).
        let mut entries: BTreeMap<ObjectKey, (Slot<K>, Arc<K>, bool)> = BTreeMap::new();
        let mut new_indexes: HashMap<String, Index<K>> = {
            let state = self.shared.state.read();
            for object in objects {
                let key = ObjectKey::of(object.as_ref());
                let kept = state.objects.get(&key).filter(|old| {
                    old.resource_version().is_some()
                        && old.resource_version() == object.meta().resource_version.as_deref()
                });
                let entry = match kept {
                    Some(Slot::Decoded(old)) => (Slot::Decoded(old.clone()), old.clone(), true),
                    Some(old) => (old.clone(), object, true),
                    None => (self.shared.slot(&object), object, false),
                };
                entries.insert(key, entry);
            }
            state
                .indexes
                .iter()
                .map(|(name, index)| {
                    let objects = entries.iter().map(|(k, (_, o, _))| (k, o.as_ref()));
                    (name.clone(), Index::build(index.func().clone(), objects))
                })
                .collect()
        };
        let mut new_objects = BTreeMap::new();
        let mut reported = Vec::with_capacity(entries.len());
        for (key, (slot, object, kept)) in entries {
            reported.push((key.clone(), object, kept));
            new_objects.insert(key, slot);
        }
        let mut old = {
            let mut guard = self.shared.state.write();
            let state = &mut *guard;
            // An index added since the read above must index the new set too.
            for (name, index) in &state.indexes {
                let current = new_indexes
                    .get(name)
                    .is_some_and(|built| Arc::ptr_eq(built.func(), index.func()));
                if !current {
                    let objects = reported.iter().map(|(k, o, _)| (k, o.as_ref()));
                    new_indexes.insert(name.clone(), Index::build(index.func().clone(), objects));
                }
            }
            state.indexes = new_indexes;
            state.resource_version = Some(resource_version);
            std::mem::replace(&mut state.objects, new_objects)
        };
        self.mark_synced();
        let listed = reported
            .into_iter()
            .map(|(key, object, kept)| {
                let replaced = match old.remove(&key) {
                    None => None,
                    Some(_) if kept => Some(object.clone()),
                    Some(slot) => self.shared.evicted(&slot),
                };
                (object, replaced)
            })
            .collect();
        let vanished = old
            .into_values()
            .filter_map(|slot| self.shared.evicted(&slot))
            .collect();
        Replaced { listed, vanished }
    }

    /// Marks the cache synced (idempotent).
    pub(crate) fn mark_synced(&self) {
        self.shared
            .synced
            .send_if_modified(|synced| !std::mem::replace(synced, true));
    }

    /// Checks the invariants: every index files exactly the cached objects, and every cached
    /// object decodes.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let state = self.shared.state.read();
        let objects: Vec<(&ObjectKey, Arc<K>)> = state
            .objects
            .iter()
            .map(|(key, slot)| (key, self.shared.object(slot, false).expect("decodes")))
            .collect();
        for (name, index) in &state.indexes {
            index.check_invariants();
            let rebuilt = Index::build(
                index.func().clone(),
                objects.iter().map(|(k, o)| (*k, o.as_ref())),
            );
            for (key, object) in &objects {
                for value in (index.func())(object) {
                    assert!(
                        index.keys(&value).any(|k| k == *key),
                        "index {name}: {key} missing under {value}"
                    );
                }
            }
            assert_eq!(
                index.values(),
                rebuilt.values(),
                "index {name} has stale values"
            );
        }
    }
}

#[cfg(test)]
#[path = "object_cache_tests.rs"]
mod tests;
