//! [`InformerFactory`]: at most one informer per process for each (resource type, namespace,
//! selectors, metadata-only), however many controllers ask for it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::Resource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;

use super::metrics::InformerMetrics;
use super::options::InformerOptions;
use super::shared::SharedInformer;
use crate::cache::ObjectCache;
use crate::watcher::{ListWatch, WatchBackoff, WatcherConfig};
use crate::Client;

/// Hands out shared informers: every caller asking for the same (resource type, namespace,
/// selectors, metadata-only) gets the same informer, so a process runs one watch for it.
/// Cheap to clone (all clones are the same factory).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use setpoint_runtime::InformerFactory;
/// # async fn example(client: setpoint_runtime::Client) {
/// let factory = InformerFactory::new(client);
/// let configmaps = factory.informer::<ConfigMap>();
/// factory.start();
/// factory.wait_for_sync().await;
/// println!("{} config maps", configmaps.store().len());
/// # }
/// ```
#[derive(Clone)]
pub struct InformerFactory {
    inner: Arc<FactoryInner>,
}

impl Debug for InformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("InformerFactory")
            .field("informers", &state.order.len())
            .field("phase", &state.phase)
            .finish()
    }
}

struct FactoryInner {
    client: Client,
    state: Mutex<FactoryState>,
}

/// Whether the factory's informers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Informers wait for [`InformerFactory::start`].
    Created,
    /// Informers start as they are created.
    Started,
    /// Informers are stopped and new ones never start.
    ShutDown,
}

struct FactoryState {
    phase: Phase,
    /// The watch timeout range of the watchers of informers created from now on.
    watch_timeout: (Duration, Duration),
    /// The backoff of the watchers of informers created from now on.
    backoff: WatchBackoff,
    /// Each informer, by what identifies it.
    informers: HashMap<InformerId, Entry>,
    /// The identities in creation order (metrics come out in this order).
    order: Vec<InformerId>,
}

/// What makes two informers the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InformerId {
    /// The cached type (`PartialObjectMeta<K>` for metadata-only informers).
    type_id: TypeId,
    /// The collection URL path: kind and namespace.
    url: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

struct Entry {
    /// The `SharedInformer<K>`.
    informer: Box<dyn Any + Send + Sync>,
    control: Box<dyn Control>,
}

/// What the factory does with an informer of any type.
trait Control: Send + Sync {
    fn start(&self);
    fn shut_down(&self);
    fn synced(&self) -> BoxFuture<'static, ()>;
    fn metrics(&self) -> (String, InformerMetrics);
}

impl<K> Control for SharedInformer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn start(&self) {
        SharedInformer::start(self);
    }

    fn shut_down(&self) {
        SharedInformer::shut_down(self);
    }

    fn synced(&self) -> BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.wait_until_synced().await })
    }

    fn metrics(&self) -> (String, InformerMetrics) {
        (self.label().to_string(), SharedInformer::metrics(self))
    }
}

impl InformerFactory {
    /// A factory whose informers use `client`.
    pub fn new(client: Client) -> InformerFactory {
        let defaults = WatcherConfig::default();
        InformerFactory {
            inner: Arc::new(FactoryInner {
                client,
                state: Mutex::new(FactoryState {
                    phase: Phase::Created,
                    watch_timeout: defaults.watch_timeout,
                    backoff: defaults.backoff,
                    informers: HashMap::new(),
                    order: Vec::new(),
                }),
            }),
        }
    }

    /// This factory, with watches of the informers it creates from now on asking the server
    /// for a random timeout in `[min, max]` (default 5 to 10 minutes).
    #[must_use]
    pub fn with_watch_timeout(self, min: Duration, max: Duration) -> InformerFactory {
        self.inner.state.lock().watch_timeout = (min, max);
        self
    }

    /// This factory, with the watchers of the informers it creates from now on backing off
    /// by `backoff` (default [`WatchBackoff::default`]).
    #[must_use]
    pub fn with_backoff(self, backoff: WatchBackoff) -> InformerFactory {
        self.inner.state.lock().backoff = backoff;
        self
    }

    /// The client the informers use.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The informer of every `K` (all namespaces, no selectors, no resync).
    pub fn informer<K>(&self) -> SharedInformer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.informer_with(InformerOptions::default())
    }

    /// The informer of the `K`s `options` select. The options other than namespace and
    /// selectors are those of the first call for this informer.
    pub fn informer_with<K>(&self, options: InformerOptions<K>) -> SharedInformer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.informer_for(&K::DynamicType::default(), options)
    }

    /// The informer of the metadata (`PartialObjectMetadata`) of every `K`: a cache a
    /// fraction of the size of the full objects'.
    pub fn metadata_informer<K>(&self) -> SharedInformer<PartialObjectMeta<K>>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.informer_for(&K::DynamicType::default(), InformerOptions::default())
    }

    /// The informer of objects of a kind known at runtime (`resource`, e.g. from discovery).
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
        options: InformerOptions<DynamicObject>,
    ) -> SharedInformer<DynamicObject> {
        self.informer_for(resource, options)
    }

    /// The informer of the metadata (`PartialObjectMetadata`) of objects of a kind known at
    /// runtime: for loops that only read names, owners and finalizers of many kinds (the
    /// garbage collector), at a fraction of the memory of whole objects.
    pub fn dynamic_metadata_informer(
        &self,
        resource: &ApiResource,
        options: InformerOptions<PartialObjectMeta<DynamicObject>>,
    ) -> SharedInformer<PartialObjectMeta<DynamicObject>> {
        self.informer_for(resource, options)
    }

    /// The informer of the `K`s of dynamic type `dyntype` that `options` select.
    fn informer_for<K>(
        &self,
        dyntype: &K::DynamicType,
        options: InformerOptions<K>,
    ) -> SharedInformer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let url = K::url_path(dyntype, options.namespace.as_deref());
        let id = InformerId {
            type_id: TypeId::of::<K>(),
            url: url.clone(),
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
        };
        let mut state = self.inner.state.lock();
        if let Some(existing) = state
            .informers
            .get(&id)
            .and_then(|entry| entry.informer.downcast_ref::<SharedInformer<K>>())
        {
            return existing.clone();
        }
        let label = label_of::<K>(dyntype, &options);
        let config = WatcherConfig {
            label_selector: options.label_selector,
            field_selector: options.field_selector,
            page_size: options.page_size,
            initial_list: options.initial_list,
            watch_timeout: state.watch_timeout,
            backoff: state.backoff,
        };
        let source = ListWatch::new(self.inner.client.kube().clone(), url, K::metadata_api());
        let store = ObjectCache::with_form(&options.cache);
        let informer = SharedInformer::new(
            label,
            source,
            store,
            config,
            options.transform,
            options.resync,
        );
        if state.phase == Phase::Started {
            informer.start();
        }
        state.order.push(id.clone());
        state.informers.insert(
            id,
            Entry {
                informer: Box::new(informer.clone()),
                control: Box::new(informer.clone()),
            },
        );
        informer
    }

    /// Starts every informer created so far; informers created later start on creation.
    /// Does nothing after [`InformerFactory::shut_down`].
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(&self) {
        let mut state = self.inner.state.lock();
        if state.phase != Phase::Created {
            return;
        }
        state.phase = Phase::Started;
        for entry in state.informers.values() {
            entry.control.start();
        }
    }

    /// Resolves once every informer started so far has synced.
    ///
    /// Cancel-safe. Waits forever while an informer cannot list: see
    /// [`SharedInformer::last_error`].
    pub async fn wait_for_sync(&self) {
        let synced: Vec<_> = {
            let state = self.inner.state.lock();
            if state.phase != Phase::Started {
                Vec::new()
            } else {
                state
                    .informers
                    .values()
                    .map(|e| e.control.synced())
                    .collect()
            }
        };
        futures::future::join_all(synced).await;
    }

    /// Stops every informer's watch and handlers, for good.
    pub fn shut_down(&self) {
        let mut state = self.inner.state.lock();
        state.phase = Phase::ShutDown;
        for entry in state.informers.values() {
            entry.control.shut_down();
        }
    }

    /// Each informer's counters, labelled with its resource plural and qualifiers (e.g.
    /// `configmaps`, `pods{namespace=ns,labels=app=web,metadata}`), in creation order.
    pub fn metrics(&self) -> Vec<(String, InformerMetrics)> {
        let state = self.inner.state.lock();
        state
            .order
            .iter()
            .filter_map(|id| state.informers.get(id))
            .map(|entry| entry.control.metrics())
            .collect()
    }
}

/// `plural` plus `{namespace=…,labels=…,fields=…,metadata}` for whichever apply.
fn label_of<K: Resource>(dyntype: &K::DynamicType, options: &InformerOptions<K>) -> String {
    let mut qualifiers = Vec::new();
    if let Some(ns) = &options.namespace {
        qualifiers.push(format!("namespace={ns}"));
    }
    if let Some(labels) = &options.label_selector {
        qualifiers.push(format!("labels={labels}"));
    }
    if let Some(fields) = &options.field_selector {
        qualifiers.push(format!("fields={fields}"));
    }
    if K::metadata_api() {
        qualifiers.push("metadata".to_string());
    }
    let plural = K::plural(dyntype);
    if qualifiers.is_empty() {
        plural.into_owned()
    } else {
        format!("{plural}{{{}}}", qualifiers.join(","))
    }
}
