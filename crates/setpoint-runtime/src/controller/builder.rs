//! [`Controller`]: the builder — what a controller watches, which changes trigger it, and its
//! limits. Nothing happens until [`run`](Controller::run) (in `runner`).

use std::fmt::{self, Debug};
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use serde::de::DeserializeOwned;

use super::handlers::{EnqueueMapped, EnqueueOwner};
use super::metrics::{ControllerHandle, Shared};
use super::predicate::Predicate;
use super::sources::{Source, Trigger};
use super::workers::Drain;
use crate::owner::OwnerKind;
use crate::{Enqueuer, EventHandler, InformerFactory, InformerOptions, ObjectKey, RateLimit};

/// Default number of reconciles running at once.
pub(crate) const DEFAULT_CONCURRENCY: usize = 2;
/// Default limit on one reconcile.
pub(crate) const DEFAULT_RECONCILE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Default limit on the wait for the caches' first lists.
pub(crate) const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// A controller for objects of kind `K`: watches `K` (and optionally owned and other kinds)
/// through a shared [`InformerFactory`], queues the keys of the `K`s that need reconciling, and
/// runs a [`Reconciler`](super::Reconciler) on them with bounded concurrency.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// use setpoint_runtime::{Action, Client, Controller, InformerFactory, Predicate};
///
/// # async fn example(client: Client) -> Result<(), setpoint_runtime::ControllerError> {
/// async fn reconcile(d: Arc<Deployment>, client: Arc<Client>) -> Result<Action, kube::Error> {
///     // ... read `d`, create or update its ReplicaSets through `client` ...
///     Ok(Action::await_change())
/// }
///
/// let factory = InformerFactory::new(client.clone());
/// let controller = Controller::<Deployment>::new(&factory)
///     .owns::<ReplicaSet>()
///     .predicate(Predicate::generation_changed())
///     .concurrency(4);
/// let metrics = controller.handle(); // for an exporter
/// controller
///     .run(reconcile, Arc::new(client), async {
///         let _ = tokio::signal::ctrl_c().await;
///     })
///     .await?;
/// # let _ = metrics;
/// # Ok(()) }
/// ```
pub struct Controller<K> {
    /// Where informers come from; shared with other controllers.
    pub(super) factory: InformerFactory,
    /// Name and counters, shared with handles.
    pub(super) shared: Arc<Shared>,
    /// Scope of the main informer.
    pub(super) options: InformerOptions<K>,
    /// All must pass for an add or update of the main resource to enqueue it.
    pub(super) predicates: Vec<Predicate<K>>,
    /// Secondary informers to create and handle at start.
    pub(super) triggers: Vec<Trigger>,
    /// Reconciles at once; at least 1.
    pub(super) concurrency: usize,
    /// Limit on one reconcile.
    pub(super) reconcile_timeout: Duration,
    /// Retry delays.
    pub(super) rate_limit: RateLimit,
    /// Period of re-enqueueing every cached main object, if any.
    pub(super) resync: Option<Duration>,
    /// Limit on the wait for the caches' first lists.
    pub(super) cache_sync_timeout: Duration,
    /// What to finish on shutdown.
    pub(super) drain: Drain,
}

impl<K> Debug for Controller<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.shared.name())
            .field("options", &self.options)
            .field("predicates", &self.predicates.len())
            .field("secondary_sources", &self.triggers.len())
            .field("concurrency", &self.concurrency)
            .field("reconcile_timeout", &self.reconcile_timeout)
            .field("rate_limit", &self.rate_limit)
            .field("resync", &self.resync)
            .field("cache_sync_timeout", &self.cache_sync_timeout)
            .field("drain", &self.drain)
            .finish_non_exhaustive()
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// A controller for every `K` the factory's client can see, named after `K`'s plural,
    /// with the defaults: concurrency 2, reconcile timeout 5 minutes, client-go's rate limit
    /// ([`RateLimit::default`]), no resync, cache-sync timeout 2 minutes, [`Drain::InFlight`].
    pub fn new(factory: &InformerFactory) -> Controller<K> {
        let name = K::plural(&K::DynamicType::default()).into_owned();
        Controller {
            factory: factory.clone(),
            shared: Shared::new(&name, DEFAULT_CONCURRENCY),
            options: InformerOptions::default(),
            predicates: Vec::new(),
            triggers: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            reconcile_timeout: DEFAULT_RECONCILE_TIMEOUT,
            rate_limit: RateLimit::default(),
            resync: None,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            drain: Drain::default(),
        }
    }

    /// Names the controller in logs, errors and metrics (default: `K`'s plural, e.g.
    /// `deployments`). Give two controllers of one kind different names.
    #[must_use]
    pub fn named(self, name: impl Into<String>) -> Self {
        self.shared.set_name(&name.into());
        self
    }

    /// Scopes the main informer (namespace, selectors, transform…). Other controllers asking
    /// the factory for the same scope share the informer.
    #[must_use]
    pub fn for_options(mut self, options: InformerOptions<K>) -> Self {
        self.options = options;
        self
    }

    /// Also reconciles a `K` when an object of kind `C` it controls changes: events on a `C`
    /// enqueue the object named by its ownerReference with `controller: true`, if that
    /// reference's kind and group are `K`'s — for an update, the controllers of both the old and
    /// the new state. Watches `C`'s metadata only (a metadata informer), to save memory.
    ///
    /// `C` may be `K` itself (an object controlling objects of its own kind).
    #[must_use]
    pub fn owns<C>(mut self) -> Self
    where
        C: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        C::DynamicType: Default,
        K::Scope: 'static,
    {
        let owner = OwnerKind::of::<K>();
        self.triggers.push(Box::new(move |factory, enqueuer| {
            let informer = factory.metadata_informer::<C>();
            let registration = informer.add_handler(EnqueueOwner { enqueuer, owner });
            Source {
                informer: Box::new(informer),
                registration,
            }
        }));
        self
    }

    /// Also reconciles the `K`s that `mapper` names when an object of kind `O` changes (for an
    /// update, the keys of both the old and the new state). Watches every `O`.
    #[must_use]
    pub fn watches<O, I>(self, mapper: impl Fn(&O) -> I + Send + Sync + 'static) -> Self
    where
        O: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        O::DynamicType: Default,
        I: IntoIterator<Item = ObjectKey>,
    {
        self.watches_with(InformerOptions::default(), mapper)
    }

    /// As [`watches`](Self::watches), with the `O` informer scoped by `options`.
    #[must_use]
    pub fn watches_with<O, I>(
        self,
        options: InformerOptions<O>,
        mapper: impl Fn(&O) -> I + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        O::DynamicType: Default,
        I: IntoIterator<Item = ObjectKey>,
    {
        self.watches_handler(options, move |enqueuer| {
            EnqueueMapped::new(enqueuer, mapper)
        })
    }

    /// Also reconciles whatever a handler of the `O` informer (scoped by `options`) enqueues:
    /// `make` receives this controller's [`Enqueuer`] and returns the handler. For a handler
    /// that must do its own bookkeeping before it enqueues — in order, on the one task that
    /// delivers its notifications — such as lowering expectations when a create is observed;
    /// for a plain mapping use [`watches`](Self::watches).
    #[must_use]
    pub fn watches_handler<O, H>(
        mut self,
        options: InformerOptions<O>,
        make: impl FnOnce(Enqueuer<ObjectKey>) -> H + Send + 'static,
    ) -> Self
    where
        O: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        O::DynamicType: Default,
        H: EventHandler<O>,
    {
        self.triggers.push(Box::new(move |factory, enqueuer| {
            let informer = factory.informer_with::<O>(options);
            let registration = informer.add_handler(make(enqueuer));
            Source {
                informer: Box::new(informer),
                registration,
            }
        }));
        self
    }

    /// Adds a filter on adds and updates of the main resource; all must pass (see
    /// [`Predicate`] for what is never filtered).
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate<K>) -> Self {
        self.predicates.push(predicate);
        self
    }

    /// How many reconciles may run at once (different keys; one key is never reconciled twice
    /// at once). Default 2; 0 is taken as 1.
    #[must_use]
    pub fn concurrency(mut self, reconciles: usize) -> Self {
        self.concurrency = reconciles.max(1);
        self.shared.set_max_concurrent_reconciles(self.concurrency);
        self
    }

    /// How long one reconcile may run before it is cancelled (dropped at its next await
    /// point), counted and retried with backoff. Default 5 minutes; `Duration::MAX` for no
    /// limit. Also bounds how long a graceful shutdown waits.
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.reconcile_timeout = timeout;
        self
    }

    /// How failed keys are retried: per-key exponential backoff under an overall token bucket
    /// (default [`RateLimit::default`]: 5 ms doubling to 1,000 s, 10 retries/s, burst 100).
    /// Event-triggered reconciles are never rate limited.
    #[must_use]
    pub fn rate_limit(mut self, rate_limit: RateLimit) -> Self {
        self.rate_limit = rate_limit;
        self
    }

    /// Every `period`, enqueues every cached main object (a cache-local resync that never
    /// talks to the API server), bypassing the predicates. The main informer options'
    /// `resync`, if set, is taken as this when this is not. Default: none — reconciles are
    /// triggered by changes, and a reconciler that must look again at something it cannot
    /// watch returns [`Action::requeue`](super::Action::requeue) for just that object.
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// How long [`run`](Self::run) waits for the informers' first lists before failing with
    /// [`ControllerError::CacheSyncTimeout`](super::ControllerError::CacheSyncTimeout).
    /// Default 2 minutes.
    #[must_use]
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = timeout;
        self
    }

    /// What a graceful shutdown finishes before [`run`](Self::run) returns (default
    /// [`Drain::InFlight`]).
    #[must_use]
    pub fn drain_on_shutdown(mut self, drain: Drain) -> Self {
        self.drain = drain;
        self
    }

    /// Registers this controller's metrics and its work queue's with `metrics`, under the
    /// controller's name (call [`named`](Self::named) first).
    #[must_use]
    pub fn registered_in(self, metrics: &crate::Metrics) -> Self {
        let handle = self.handle();
        let name = handle.name();
        let queue = handle.clone();
        metrics.add_controller(&name, move || handle.metrics());
        metrics.add_queue(&name, move || queue.queue_metrics());
        self
    }

    /// A cloneable handle reading this controller's name and metrics, valid before, during
    /// and after [`run`](Self::run).
    pub fn handle(&self) -> ControllerHandle {
        ControllerHandle::new(Arc::clone(&self.shared))
    }
}
