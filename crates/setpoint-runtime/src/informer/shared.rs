//! [`SharedInformer`]: one watcher feeding one indexed cache and any number of handlers.
//!
//! Start it once ([`SharedInformer::start`]); it then runs a task that applies the watcher's
//! lists and events to the cache and queues a notification per change to every handler:
//! - `Applied` → `on_add` (new key) or `on_update(old, new)`;
//! - `Deleted` → `on_delete(Deleted::Final(final state))` (ignored if the key was not cached);
//! - `Listed` → the cache is replaced atomically, then objects that vanished get
//!   `on_delete(Deleted::FinalStateUnknown(last cached))`, and every listed object gets
//!   `on_add(obj, first_list)` if it is new or `on_update(old, new)` if it was cached — always,
//!   as client-go's `Replaced` delta does, even when its resource version did not change (then
//!   `new` is the very `Arc` that was cached, so `Arc::ptr_eq(old, new)` tells).

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::dispatch::{add_handler, Fanout, Notification};
use super::handler::{Deleted, EventHandler, HandlerRegistration};
use super::metrics::InformerMetrics;
use crate::cache::{IndexFn, ObjectCache};
use crate::watcher::{ListWatch, Machine, WatchError, WatchStats, WatcherConfig, WatcherEvent};
use crate::ObjectKey;

/// A shared informer: a watch, the indexed cache it keeps, and the handlers it notifies.
/// Cheap to clone (all clones are the same informer).
pub struct SharedInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedInformer<K> {
    fn clone(&self) -> Self {
        SharedInformer {
            inner: self.inner.clone(),
        }
    }
}

impl<K> Debug for SharedInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformer")
            .field("label", &self.inner.label)
            .finish_non_exhaustive()
    }
}

type TransformFn<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

struct Inner<K> {
    /// Names the informer in metrics and logs.
    label: String,
    store: ObjectCache<K>,
    fanout: Arc<Mutex<Fanout<K>>>,
    stats: Arc<WatchStats>,
    /// Watch events applied to the cache.
    events: AtomicU64,
    config: WatcherConfig,
    transform: Option<TransformFn<K>>,
    /// The resync period of handlers added without one.
    default_resync: Option<Duration>,
    run: Mutex<Run<K>>,
}

/// Whether the informer's task runs.
enum Run<K> {
    /// Not started; the source to start with.
    Idle(ListWatch<K>),
    /// Started.
    Running(JoinHandle<()>),
    /// Shut down for good.
    ShutDown,
}

impl<K> SharedInformer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// An informer over `source`, not started.
    pub(crate) fn new(
        label: String,
        source: ListWatch<K>,
        store: ObjectCache<K>,
        config: WatcherConfig,
        transform: Option<TransformFn<K>>,
        default_resync: Option<Duration>,
    ) -> SharedInformer<K> {
        SharedInformer {
            inner: Arc::new(Inner {
                label,
                store,
                fanout: Arc::new(Mutex::new(Fanout::new())),
                stats: Arc::default(),
                events: AtomicU64::new(0),
                config,
                transform,
                default_resync,
                run: Mutex::new(Run::Idle(source)),
            }),
        }
    }

    /// The informer's name in metrics: the resource plural and qualifiers.
    pub(crate) fn label(&self) -> &str {
        &self.inner.label
    }

    /// A read handle on the cache.
    pub fn store(&self) -> ObjectCache<K> {
        self.inner.store.clone()
    }

    /// Adds a handler, with the informer's default resync period. If the cache has synced,
    /// the handler first gets `on_add(obj, true)` for every cached object.
    pub fn add_handler(&self, handler: impl EventHandler<K>) -> HandlerRegistration {
        add_handler(
            &self.inner.fanout,
            &self.inner.store,
            Arc::new(handler),
            self.inner.default_resync,
        )
    }

    /// Adds a handler that also gets every cached object as `on_update(obj, obj)` every
    /// `period` (a resync never talks to the API server).
    pub fn add_handler_with_resync(
        &self,
        handler: impl EventHandler<K>,
        period: Duration,
    ) -> HandlerRegistration {
        add_handler(
            &self.inner.fanout,
            &self.inner.store,
            Arc::new(handler),
            Some(period),
        )
    }

    /// Adds (or replaces) the index `name`; objects already cached are indexed at once.
    pub fn add_index(&self, name: &str, index: IndexFn<K>) {
        self.inner.store.add_index(name, index);
    }

    /// Starts the watch (and the handlers' tasks) on the current tokio runtime. Idempotent;
    /// does nothing after [`SharedInformer::shut_down`].
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(&self) {
        let mut run = self.inner.run.lock();
        if !matches!(*run, Run::Idle(_)) {
            return;
        }
        let Run::Idle(source) = std::mem::replace(&mut *run, Run::ShutDown) else {
            return;
        };
        let runtime = tokio::runtime::Handle::current();
        self.inner.fanout.lock().start(runtime.clone());
        // The watcher transforms objects as they arrive: a list never holds untransformed
        // objects beyond the page (or event) being decoded.
        let stream = Machine::new(source, self.inner.config.clone(), self.inner.stats.clone())
            .with_transform(self.inner.transform.clone())
            .into_stream();
        *run = Run::Running(runtime.spawn(run_informer(self.inner.clone(), stream)));
    }

    /// Stops the watch and every handler task, for good.
    pub fn shut_down(&self) {
        let run = std::mem::replace(&mut *self.inner.run.lock(), Run::ShutDown);
        if let Run::Running(task) = run {
            task.abort();
        }
        self.inner.fanout.lock().shut_down();
    }

    /// Resolves once the first complete list is in the cache.
    ///
    /// Cancel-safe. Waits forever if the informer is never started or cannot list: see
    /// [`SharedInformer::last_error`].
    pub async fn wait_until_synced(&self) {
        self.inner.store.wait_until_synced().await;
    }

    /// The most recent list/watch error (an RBAC 403, a missing resource's 404…), cleared by
    /// the next successful list or watch request.
    pub fn last_error(&self) -> Option<String> {
        self.inner.stats.last_error()
    }

    /// The informer's counters now.
    pub fn metrics(&self) -> InformerMetrics {
        let stats = &self.inner.stats;
        let lists = WatchStats::get(&stats.lists);
        InformerMetrics {
            lists_total: lists,
            relists_total: lists.saturating_sub(1),
            watches_total: WatchStats::get(&stats.watches),
            watch_restarts_total: WatchStats::get(&stats.watch_restarts),
            watch_errors_total: WatchStats::get(&stats.errors),
            events_total: self.inner.events.load(Ordering::Relaxed),
            objects: self.inner.store.len(),
            synced: self.inner.store.is_synced(),
        }
    }
}

/// The informer's task: applies the watcher's output to the cache and notifies handlers.
async fn run_informer<K, S>(inner: Arc<Inner<K>>, stream: S)
where
    K: Resource + Clone + Send + Sync + 'static,
    S: Stream<Item = Result<WatcherEvent<K>, WatchError>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut first_list = true;
    while let Some(item) = stream.next().await {
        // Errors are counted, logged and kept as `last_error` by the watcher, which backs off
        // by itself.
        if let Ok(event) = item {
            let listed = matches!(event, WatcherEvent::Listed { .. });
            apply(&inner, event, first_list);
            if listed {
                first_list = false;
            }
        }
    }
}

/// Applies one watcher event to the cache and queues its notifications.
fn apply<K>(inner: &Inner<K>, event: WatcherEvent<K>, first_list: bool)
where
    K: Resource + Clone + Send + Sync + 'static,
{
    // Objects come transformed from the watcher.
    match event {
        WatcherEvent::Listed {
            objects,
            resource_version,
        } => {
            let objects: Vec<Arc<K>> = objects.into_iter().map(Arc::new).collect();
            let fanout = inner.fanout.lock();
            let replaced = inner.store.replace(objects, resource_version);
            for gone in replaced.vanished {
                fanout.send(&Notification::Delete(Deleted::FinalStateUnknown(gone)));
            }
            for (new, old) in replaced.listed {
                fanout.send(&match old {
                    Some(old) => Notification::Update { old, new },
                    None => Notification::Add {
                        object: new,
                        in_initial_list: first_list,
                    },
                });
            }
            if first_list {
                fanout.send(&Notification::Synced);
            }
        }
        WatcherEvent::Applied(object) => {
            inner.events.fetch_add(1, Ordering::Relaxed);
            let new = Arc::new(object);
            let fanout = inner.fanout.lock();
            let notification = match inner.store.apply(new.clone()) {
                Some(old) => Notification::Update { old, new },
                None => Notification::Add {
                    object: new,
                    in_initial_list: false,
                },
            };
            fanout.send(&notification);
        }
        WatcherEvent::Deleted(object) => {
            inner.events.fetch_add(1, Ordering::Relaxed);
            let key = ObjectKey::of(&object);
            let fanout = inner.fanout.lock();
            let removed = inner
                .store
                .remove(&key, object.meta().resource_version.clone());
            if removed {
                fanout.send(&Notification::Delete(Deleted::Final(Arc::new(object))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::super::options::InformerOptions;
    use super::super::testing::{cm, take, Recorder};
    use super::*;

    /// An informer whose watch is never started: events are fed to `apply` by hand.
    fn informer(options: InformerOptions<ConfigMap>) -> SharedInformer<ConfigMap> {
        let client = crate::Client::in_process(|_request| async {
            http::Response::new(String::from("not used"))
        });
        let source = ListWatch::new(client.kube().clone(), "/api/v1/configmaps".into(), false);
        let informer = SharedInformer::new(
            "configmaps".into(),
            source,
            ObjectCache::with_form(&options.cache),
            WatcherConfig::default(),
            options.transform,
            options.resync,
        );
        informer
            .inner
            .fanout
            .lock()
            .start(tokio::runtime::Handle::current());
        informer
    }

    fn listed(objects: Vec<ConfigMap>, rv: &str) -> WatcherEvent<ConfigMap> {
        WatcherEvent::Listed {
            objects,
            resource_version: rv.into(),
        }
    }

    #[tokio::test]
    async fn informer_should_emit_tombstones_and_updates_on_relist() {
        for options in [
            InformerOptions::default(),
            InformerOptions::default().compact(),
        ] {
            emit_tombstones_and_updates_on_relist(options).await;
        }
    }

    async fn emit_tombstones_and_updates_on_relist(options: InformerOptions<ConfigMap>) {
        let informer = informer(options);
        let (recorder, mut rx) = Recorder::new();
        let registration = informer.add_handler(recorder);
        apply(
            &informer.inner,
            listed(vec![cm("a", "1"), cm("b", "1"), cm("c", "1")], "1"),
            true,
        );
        let mut initial = take(&mut rx, 3).await;
        initial.sort();
        assert_eq!(
            initial,
            ["add ns/a initial", "add ns/b initial", "add ns/c initial"]
        );

        apply(&informer.inner, WatcherEvent::Applied(cm("a", "2")), false);
        assert_eq!(take(&mut rx, 1).await, ["update ns/a 1->2"]);

        // The watch fell behind: b changed, c was deleted, d was created meanwhile.
        apply(
            &informer.inner,
            listed(vec![cm("a", "2"), cm("b", "5"), cm("d", "6")], "6"),
            false,
        );
        assert_eq!(
            take(&mut rx, 4).await,
            [
                "delete ns/c unknown",
                "update ns/a 2->2 same",
                "update ns/b 1->5",
                "add ns/d",
            ]
        );
        assert!(registration.has_synced());
        let store = informer.store();
        assert_eq!(store.len(), 3);
        assert_eq!(store.resource_version().as_deref(), Some("6"));
        let metrics = informer.metrics();
        assert_eq!(
            (metrics.events_total, metrics.objects, metrics.synced),
            (1, 3, true)
        );
    }

    #[tokio::test]
    async fn informer_should_deliver_final_state_deletes_only_for_cached_objects() {
        for options in [
            InformerOptions::default(),
            InformerOptions::default().compact(),
        ] {
            deliver_final_state_deletes_only_for_cached_objects(options).await;
        }
    }

    async fn deliver_final_state_deletes_only_for_cached_objects(
        options: InformerOptions<ConfigMap>,
    ) {
        let informer = informer(options);
        let (recorder, mut rx) = Recorder::new();
        informer.add_handler(recorder);
        apply(&informer.inner, listed(vec![cm("a", "1")], "1"), true);
        assert_eq!(take(&mut rx, 1).await, ["add ns/a initial"]);
        apply(
            &informer.inner,
            WatcherEvent::Deleted(cm("unknown", "2")),
            false,
        );
        apply(&informer.inner, WatcherEvent::Deleted(cm("a", "3")), false);
        assert_eq!(take(&mut rx, 1).await, ["delete ns/a final"]);
        assert!(informer.store().is_empty());
        assert_eq!(informer.store().resource_version().as_deref(), Some("3"));
    }

    #[tokio::test]
    async fn informer_should_give_late_handlers_the_current_cache_then_changes() {
        let informer = informer(InformerOptions::default());
        apply(&informer.inner, listed(vec![cm("a", "1")], "1"), true);
        let (recorder, mut rx) = Recorder::new();
        informer.add_handler(recorder);
        apply(&informer.inner, WatcherEvent::Applied(cm("b", "2")), false);
        assert_eq!(take(&mut rx, 2).await, ["add ns/a initial", "add ns/b"]);
    }
}
