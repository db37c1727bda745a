//! [`InformerOptions`]: what an informer watches and how it treats what it caches.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::cache::CacheForm;
use crate::watcher::InitialList;

/// What an informer watches and how. The namespace and selectors identify the informer
/// (with the kind and whether it is metadata-only); the other options are set by the first
/// caller to ask a factory for that informer.
pub struct InformerOptions<K> {
    /// Watch one namespace; `None` for all namespaces (or a cluster-scoped kind).
    pub namespace: Option<String>,
    /// Only objects whose labels match this selector.
    pub label_selector: Option<String>,
    /// Only objects whose fields match this selector.
    pub field_selector: Option<String>,
    /// How often handlers added with [`SharedInformer::add_handler`](super::SharedInformer::add_handler)
    /// get every cached object again as `on_update(obj, obj)`; `None` for never.
    pub resync: Option<Duration>,
    /// Applied to every object before it is cached, e.g. to strip `managedFields`.
    pub transform: Option<Arc<dyn Fn(K) -> K + Send + Sync>>,
    /// How lists are read.
    pub initial_list: InitialList,
    /// Objects per page of a paged list; `None` for one response.
    pub page_size: Option<u32>,
    /// How the cache holds objects: decoded (the default) or compact; see [`CacheForm`].
    pub cache: CacheForm<K>,
}

impl<K> Default for InformerOptions<K> {
    /// All namespaces, no selectors, no resync, no transform, streaming lists where offered,
    /// pages of 500, a decoded cache.
    fn default() -> Self {
        InformerOptions {
            namespace: None,
            label_selector: None,
            field_selector: None,
            resync: None,
            transform: None,
            initial_list: InitialList::Auto,
            page_size: Some(500),
            cache: CacheForm::decoded(),
        }
    }
}

impl<K> Clone for InformerOptions<K> {
    fn clone(&self) -> Self {
        InformerOptions {
            namespace: self.namespace.clone(),
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            resync: self.resync,
            transform: self.transform.clone(),
            initial_list: self.initial_list,
            page_size: self.page_size,
            cache: self.cache.clone(),
        }
    }
}

impl<K> fmt::Debug for InformerOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerOptions")
            .field("namespace", &self.namespace)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("resync", &self.resync)
            .field("transform", &self.transform.as_ref().map(|_| "…"))
            .field("initial_list", &self.initial_list)
            .field("page_size", &self.page_size)
            .field("cache", &self.cache)
            .finish()
    }
}

impl<K: Resource> InformerOptions<K> {
    /// These options with a transform that drops `metadata.managedFields` (often a fifth of
    /// an object's size, and of no use to a controller's cache).
    #[must_use]
    pub fn strip_managed_fields(mut self) -> Self {
        self.transform = Some(Arc::new(|mut object: K| {
            object.meta_mut().managed_fields = None;
            object
        }));
        self
    }
}

impl<K: Serialize + DeserializeOwned> InformerOptions<K> {
    /// These options with a compact cache ([`CacheForm::compact`]): each object held as
    /// LZ4-compressed JSON and decoded on read, the 256 most recently used kept decoded.
    /// For big caches of big objects — all Pods of a cluster in a scheduler, node agent or
    /// garbage collector — where memory matters more than the tens of µs a read of an
    /// object not recently used costs. Combine with [`InformerOptions::strip_managed_fields`]:
    /// a typical Pod takes about 3.1 KB this way against about 30 KB decoded.
    #[must_use]
    pub fn compact(mut self) -> Self {
        self.cache = CacheForm::compact();
        self
    }
}
