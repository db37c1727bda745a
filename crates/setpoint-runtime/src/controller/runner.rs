//! [`Controller::run`]: a controller's life — add handlers, start the informers, wait for
//! their caches, reconcile until told to stop, then wind down.
//!
//! 1. The main informer (scoped by `for_options`) gets the controller's handler (with the
//!    resync period, if any); each `owns`/`watches` source gets its informer and handler.
//! 2. [`InformerFactory::start`](crate::InformerFactory::start) starts every informer of the
//!    factory not yet running (it is shared: other controllers' informers start too).
//! 3. The controller waits until every one of its informers has listed once, at most the
//!    cache-sync timeout: a reconcile never sees a cache that is still filling. A timeout is an
//!    error naming each unsynced informer and its last list/watch error.
//! 4. `concurrency` workers reconcile (see `workers`).
//! 5. When `shutdown` resolves, the queue stops taking keys and the workers finish what the
//!    [`Drain`](super::Drain) says; then the handlers are removed and `run` returns. The
//!    informers keep running: they belong to the factory, which other controllers may share —
//!    shut the factory down when the process is done with it.

use std::fmt::Debug;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use kube::Resource;
use serde::de::DeserializeOwned;

use super::builder::Controller;
use super::error::ControllerError;
use super::handlers::{EnqueueSelf, Resync};
use super::reconciler::Reconciler;
use super::sources::{Source, Sources};
use super::workers::Pool;
use crate::WorkQueue;

impl<K> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// Runs the controller until `shutdown` resolves: starts the informers, waits for their
    /// caches (at most the cache-sync timeout), then reconciles every queued key with
    /// `reconciler`, passing it `context`. Returns `Ok(())` after a graceful shutdown, which
    /// lets reconciles in flight finish (see [`Drain`](super::Drain)); returns early with
    /// [`ControllerError::CacheSyncTimeout`] if the caches do not sync in time.
    ///
    /// Reconcile errors, panics and timeouts never end `run`: they are logged with the key,
    /// counted in the [metrics](super::ControllerHandle::metrics) and retried with backoff.
    ///
    /// Cancel-safe in a limited sense: dropping the future stops the workers at once
    /// (reconciles in flight are cancelled) and removes the handlers, leaving nothing running
    /// but the factory's informers.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (starting informers needs one).
    pub async fn run<R, C>(
        self,
        reconciler: R,
        context: Arc<C>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ControllerError>
    where
        R: Reconciler<K, C>,
        C: Send + Sync + 'static,
    {
        let Controller {
            factory,
            shared,
            options,
            predicates,
            triggers,
            concurrency,
            reconcile_timeout,
            rate_limit,
            resync,
            cache_sync_timeout,
            drain,
        } = self;
        let name = shared.name();
        // A resync asked for through the informer options is this controller's resync too.
        let resync = resync.or(options.resync);
        let queue = WorkQueue::with_rate_limit(rate_limit);
        shared.set_queue(&queue);

        let main = factory.informer_with::<K>(options);
        let store = main.store();
        let handler = EnqueueSelf {
            enqueuer: queue.enqueuer(),
            predicates,
            resync: if resync.is_some() {
                Resync::On
            } else {
                Resync::Off
            },
        };
        let registration = match resync {
            Some(period) => main.add_handler_with_resync(handler, period),
            None => main.add_handler(handler),
        };
        let mut sources = Sources(vec![Source {
            informer: Box::new(main),
            registration,
        }]);
        for trigger in triggers {
            sources.0.push(trigger(&factory, queue.enqueuer()));
        }
        factory.start();

        let mut shutdown = pin!(shutdown);
        tracing::debug!(controller = %name, informers = sources.0.len(), "waiting for caches to sync");
        let synced = futures::future::join_all(sources.0.iter().map(|s| s.informer.synced()));
        tokio::select! {
            () = &mut shutdown => {
                tracing::info!(controller = %name, "shut down before the caches synced");
                queue.shut_down();
                return Ok(());
            }
            synced = tokio::time::timeout(cache_sync_timeout, synced) => {
                if synced.is_err() {
                    queue.shut_down();
                    let error = ControllerError::CacheSyncTimeout {
                        controller: name.to_string(),
                        timeout: cache_sync_timeout,
                        unsynced: sources.0.iter().filter_map(Source::unsynced).collect(),
                    };
                    tracing::error!(controller = %name, %error, "not starting");
                    return Err(error);
                }
            }
        }

        tracing::info!(controller = %name, workers = concurrency, "caches synced; starting workers");
        let pool = Pool {
            queue,
            lookup: Arc::new(move |key| store.get(key)),
            reconciler: Arc::new(reconciler),
            context,
            timeout: reconcile_timeout,
            shared,
        };
        pool.run(concurrency, drain, shutdown).await;
        drop(sources);
        tracing::info!(controller = %name, "stopped");
        Ok(())
    }
}
