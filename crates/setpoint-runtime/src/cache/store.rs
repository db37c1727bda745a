//! [`Store`]: the read handle on an informer's indexed cache, and the writer methods the
//! informer applies watch events with.
//!
//! Objects are held once, as `Arc<K>`, in a map ordered by [`ObjectKey`] (namespace, then
//! name): that order is the built-in namespace index — a namespace's objects are one range of
//! the map. User indexes ([`IndexFn`]) file keys, never copies of objects.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use kube::Resource;
use parking_lot::RwLock;
use setpoint_core::LabelSelector;
use tokio::sync::watch;

use super::index::{Index, IndexFn};
use crate::ObjectKey;

/// Errors reading a [`Store`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// No index of this name was added to the cache.
    #[error("the cache has no index named {0:?}")]
    UnknownIndex(String),
}

/// A cloneable read handle on an indexed cache of `Arc<K>` keyed by [`ObjectKey`].
///
/// Readers never see a half-applied relist: a complete list replaces the whole content under
/// one write lock. Reads return `Arc`s sharing the cached objects — no copies; treat them as
/// read-only snapshots (clone the object to modify it).
pub struct Store<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            shared: self.shared.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state.read();
        f.debug_struct("Store")
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
}

/// The cache content.
struct State<K> {
    /// Every cached object, by key: the namespace index is this map's order.
    objects: BTreeMap<ObjectKey, Arc<K>>,
    /// User indexes by name. Each indexes exactly the objects in `objects`.
    indexes: HashMap<String, Index<K>>,
    /// The resource version the content is at: the last list's, or the last applied event's.
    resource_version: Option<String>,
}

/// The keys of `namespace`'s objects form this range of the key order.
fn namespace_range(namespace: &str) -> (Bound<ObjectKey>, Bound<ObjectKey>) {
    (
        Bound::Included(ObjectKey::namespaced(namespace, "")),
        Bound::Unbounded,
    )
}

impl<K: Resource> Store<K> {
    /// The object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.shared.state.read().objects.get(key).cloned()
    }

    /// Every object, in key order (cluster-scoped first, then by namespace and name).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.shared.state.read().objects.values().cloned().collect()
    }

    /// The objects in `namespace`, in name order (the built-in namespace index).
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let state = self.shared.state.read();
        state
            .objects
            .range(namespace_range(namespace))
            .take_while(|(key, _)| key.namespace.as_deref() == Some(namespace))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// The objects (in `namespace`, or in all namespaces if `None`) whose labels match
    /// `selector`.
    pub fn list_selected(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<K>> {
        let state = self.shared.state.read();
        let matches = |o: &&Arc<K>| selector.matches(kube::ResourceExt::labels(o.as_ref()));
        match namespace {
            Some(ns) => state
                .objects
                .range(namespace_range(ns))
                .take_while(|(key, _)| key.namespace.as_deref() == Some(ns))
                .map(|(_, o)| o)
                .filter(matches)
                .cloned()
                .collect(),
            None => state.objects.values().filter(matches).cloned().collect(),
        }
    }

    /// The objects filed under `value` in the index named `index`, in key order.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError> {
        let state = self.shared.state.read();
        let found = state
            .indexes
            .get(index)
            .ok_or_else(|| CacheError::UnknownIndex(index.to_string()))?;
        Ok(found
            .keys(value)
            .filter_map(|key| state.objects.get(key).cloned())
            .collect())
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.shared.state.read().objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.shared.state.read().objects.is_empty()
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
}

/// The writer side, used by the informer that owns the cache (a single writer), and
/// [`Store::add_index`], which may be called from anywhere.
impl<K: Resource> Store<K> {
    /// An empty, unsynced cache.
    pub(crate) fn new() -> Store<K> {
        Store {
            shared: Arc::new(Shared {
                state: RwLock::new(State {
                    objects: BTreeMap::new(),
                    indexes: HashMap::new(),
                    resource_version: None,
                }),
                synced: watch::Sender::new(false),
            }),
        }
    }

    /// Adds (or replaces) the index `name`, indexing the objects already cached.
    pub(crate) fn add_index(&self, name: &str, func: IndexFn<K>) {
        let mut state = self.shared.state.write();
        let index = Index::build(func, &state.objects);
        state.indexes.insert(name.to_string(), index);
    }

    /// Caches `object` (added or modified), returning the object it replaces.
    pub(crate) fn apply(&self, object: Arc<K>) -> Option<Arc<K>> {
        let key = ObjectKey::of(object.as_ref());
        let mut guard = self.shared.state.write();
        let state = &mut *guard;
        if let Some(rv) = object.meta().resource_version.clone() {
            state.resource_version = Some(rv);
        }
        let old = state.objects.insert(key.clone(), object.clone());
        for index in state.indexes.values_mut() {
            if let Some(old) = &old {
                index.remove(&key, old);
            }
            index.insert(&key, &object);
        }
        old
    }

    /// Removes the object with `key`, returning it; `resource_version` is the deletion's.
    pub(crate) fn remove(
        &self,
        key: &ObjectKey,
        resource_version: Option<String>,
    ) -> Option<Arc<K>> {
        let mut guard = self.shared.state.write();
        let state = &mut *guard;
        if resource_version.is_some() {
            state.resource_version = resource_version;
        }
        let old = state.objects.remove(key)?;
        for index in state.indexes.values_mut() {
            index.remove(key, &old);
        }
        Some(old)
    }

    /// Replaces the whole content with `objects` at `resource_version` and marks the cache
    /// synced, returning the replaced objects.
    ///
    /// An object whose resource version equals the cached one's keeps the cached `Arc` (the
    /// new copy is dropped), so an unchanged object is never held twice. The replacement and
    /// its indexes are built beside the current content, then swapped in under the write
    /// lock: readers see the old set or the new one, never a mix.
    pub(crate) fn replace(
        &self,
        objects: Vec<Arc<K>>,
        resource_version: String,
    ) -> BTreeMap<ObjectKey, Arc<K>> {
        let (new_objects, mut new_indexes) = {
            let state = self.shared.state.read();
            let mut new_objects = BTreeMap::new();
            for object in objects {
                let key = ObjectKey::of(object.as_ref());
                let kept = state.objects.get(&key).filter(|old| {
                    old.meta().resource_version.is_some()
                        && old.meta().resource_version == object.meta().resource_version
                });
                new_objects.insert(key, kept.cloned().unwrap_or(object));
            }
            let new_indexes: HashMap<String, Index<K>> = state
                .indexes
                .iter()
                .map(|(name, index)| {
                    (
                        name.clone(),
                        Index::build(index.func().clone(), &new_objects),
                    )
                })
                .collect();
            (new_objects, new_indexes)
        };
        let old = {
            let mut guard = self.shared.state.write();
            let state = &mut *guard;
            // An index added since the read above must index the new set too.
            for (name, index) in &state.indexes {
                let current = new_indexes
                    .get(name)
                    .is_some_and(|built| Arc::ptr_eq(built.func(), index.func()));
                if !current {
                    new_indexes.insert(
                        name.clone(),
                        Index::build(index.func().clone(), &new_objects),
                    );
                }
            }
            state.indexes = new_indexes;
            state.resource_version = Some(resource_version);
            std::mem::replace(&mut state.objects, new_objects)
        };
        self.mark_synced();
        old
    }

    /// Marks the cache synced (idempotent).
    pub(crate) fn mark_synced(&self) {
        self.shared
            .synced
            .send_if_modified(|synced| !std::mem::replace(synced, true));
    }

    /// Checks the invariants: every index files exactly the cached objects.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let state = self.shared.state.read();
        for (name, index) in &state.indexes {
            let rebuilt = Index::build(index.func().clone(), &state.objects);
            for (key, object) in &state.objects {
                for value in (index.func())(object) {
                    assert!(
                        index.keys(&value).any(|k| k == key),
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
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};

    use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec};
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(ns: Option<&str>, name: &str, rv: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: ns.map(String::from),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn pod(ns: &str, name: &str, node: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn by_node() -> IndexFn<Pod> {
        Arc::new(|p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .into_iter()
                .collect()
        })
    }

    fn names<K: Resource>(objects: &[Arc<K>]) -> Vec<String> {
        objects
            .iter()
            .map(|o| ObjectKey::of(o.as_ref()).to_string())
            .collect()
    }

    #[test]
    fn store_should_get_by_key_and_list_by_namespace() {
        let store = Store::new();
        for (ns, name) in [("b", "x"), ("a", "y"), ("a", "x"), ("ab", "z")] {
            store.apply(cm(Some(ns), name, "1", &[]));
        }
        store.apply(cm(None, "cluster", "1", &[]));
        assert_eq!(store.len(), 5);
        assert!(store.get(&ObjectKey::namespaced("a", "y")).is_some());
        assert!(store.get(&ObjectKey::namespaced("a", "z")).is_none());
        assert_eq!(names(&store.list_namespace("a")), ["a/x", "a/y"]);
        assert_eq!(names(&store.list_namespace("ab")), ["ab/z"]);
        assert_eq!(names(&store.list_namespace("c")), Vec::<String>::new());
        assert_eq!(
            names(&store.list()),
            ["cluster", "a/x", "a/y", "ab/z", "b/x"]
        );
    }

    #[test]
    fn store_should_list_by_label_selector_in_a_namespace_or_everywhere() {
        let store = Store::new();
        store.apply(cm(Some("a"), "web", "1", &[("app", "web")]));
        store.apply(cm(Some("a"), "db", "1", &[("app", "db")]));
        store.apply(cm(Some("b"), "web", "1", &[("app", "web"), ("tier", "1")]));
        let web = LabelSelector::parse("app=web").expect("valid selector");
        assert_eq!(names(&store.list_selected(None, &web)), ["a/web", "b/web"]);
        assert_eq!(names(&store.list_selected(Some("b"), &web)), ["b/web"]);
        let not_web = LabelSelector::parse("app!=web").expect("valid selector");
        assert_eq!(names(&store.list_selected(None, &not_web)), ["a/db"]);
    }

    #[test]
    fn store_should_keep_a_custom_index_current_through_updates_and_deletes() {
        let store = Store::new();
        store.add_index("node", by_node());
        store.apply(pod("ns", "p1", "n1"));
        store.apply(pod("ns", "p2", "n1"));
        store.apply(pod("ns", "p3", "n2"));
        assert_eq!(
            names(&store.by_index("node", "n1").expect("index exists")),
            ["ns/p1", "ns/p2"]
        );
        // p2 moves to n2, p1 goes.
        store.apply(pod("ns", "p2", "n2"));
        store.remove(&ObjectKey::namespaced("ns", "p1"), None);
        assert_eq!(
            names(&store.by_index("node", "n1").expect("index exists")),
            Vec::<String>::new()
        );
        assert_eq!(
            names(&store.by_index("node", "n2").expect("index exists")),
            ["ns/p2", "ns/p3"]
        );
        store.check_invariants();
    }

    #[test]
    fn store_should_index_objects_cached_before_the_index_was_added() {
        let store = Store::new();
        store.apply(pod("ns", "p1", "n1"));
        store.apply(pod("ns", "p2", "n2"));
        assert_eq!(
            store.by_index("node", "n1").map(|v| v.len()),
            Err(CacheError::UnknownIndex("node".into()))
        );
        store.add_index("node", by_node());
        assert_eq!(
            names(&store.by_index("node", "n2").expect("index exists")),
            ["ns/p2"]
        );
        store.check_invariants();
    }

    #[test]
    fn store_should_replace_content_and_indexes_and_return_the_old_set() {
        let store = Store::new();
        store.add_index("node", by_node());
        store.apply(pod("ns", "old", "n1"));
        let old = store.replace(vec![pod("ns", "new", "n1")], "7".into());
        assert_eq!(
            old.keys().map(ToString::to_string).collect::<Vec<_>>(),
            ["ns/old"]
        );
        assert_eq!(names(&store.list()), ["ns/new"]);
        assert_eq!(
            names(&store.by_index("node", "n1").expect("index exists")),
            ["ns/new"]
        );
        assert_eq!(store.resource_version().as_deref(), Some("7"));
        assert!(store.is_synced());
        store.check_invariants();
    }

    #[test]
    fn store_should_keep_the_cached_arc_when_a_relisted_object_is_unchanged() {
        let store = Store::new();
        let same = cm(Some("ns"), "same", "5", &[]);
        let changed = cm(Some("ns"), "changed", "5", &[]);
        store.apply(same.clone());
        store.apply(changed.clone());
        store.replace(
            vec![
                cm(Some("ns"), "same", "5", &[]),
                cm(Some("ns"), "changed", "6", &[]),
            ],
            "6".into(),
        );
        let cached_same = store
            .get(&ObjectKey::namespaced("ns", "same"))
            .expect("cached");
        let cached_changed = store
            .get(&ObjectKey::namespaced("ns", "changed"))
            .expect("cached");
        assert!(Arc::ptr_eq(&cached_same, &same), "unchanged: one copy only");
        assert!(!Arc::ptr_eq(&cached_changed, &changed));
    }

    #[test]
    fn store_should_never_show_a_reader_a_half_applied_relist() {
        // Two sets with disjoint keys, swapped back and forth while readers list: every read
        // must be exactly one of them.
        let set = |prefix: &str| -> Vec<Arc<ConfigMap>> {
            (0..200)
                .map(|i| {
                    cm(
                        Some("ns"),
                        &format!("{prefix}{i:03}"),
                        "1",
                        &[("set", prefix)],
                    )
                })
                .collect()
        };
        let store = Store::new();
        store.add_index(
            "set",
            Arc::new(|c: &ConfigMap| {
                c.metadata
                    .labels
                    .iter()
                    .flatten()
                    .map(|(_, v)| v.clone())
                    .collect()
            }),
        );
        store.replace(set("a"), "1".into());
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let store = store.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !done.load(Ordering::Relaxed) || reads < 100 {
                        let all = store.list();
                        let first = all[0].metadata.name.clone().unwrap_or_default();
                        let prefix = &first[..1];
                        assert_eq!(all.len(), 200, "a whole set");
                        assert!(
                            all.iter().all(|o| o
                                .metadata
                                .name
                                .as_deref()
                                .is_some_and(|n| n.starts_with(prefix))),
                            "a read mixed two lists"
                        );
                        let indexed = store.by_index("set", prefix).expect("index exists");
                        assert!(
                            indexed.len() == 200 || indexed.is_empty(),
                            "an index mixed two lists"
                        );
                        reads += 1;
                    }
                })
            })
            .collect();
        for round in 0..200 {
            let prefix = if round % 2 == 0 { "b" } else { "a" };
            store.replace(set(prefix), round.to_string());
        }
        done.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().expect("no reader saw a mixed list");
        }
        store.check_invariants();
    }

    #[tokio::test]
    async fn store_should_resolve_wait_until_synced_after_the_first_list() {
        let store: Store<ConfigMap> = Store::new();
        let waiter = {
            let store = store.clone();
            tokio::spawn(async move { store.wait_until_synced().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        assert!(!store.is_synced());
        store.replace(Vec::new(), "1".into());
        waiter.await.expect("waiter resolves");
        assert!(store.is_synced());
        // Already synced: resolves at once.
        store.wait_until_synced().await;
    }
}
