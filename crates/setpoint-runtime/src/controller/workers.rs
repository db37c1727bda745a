//! The workers: a fixed number of tasks claiming keys from the work queue and reconciling them,
//! and what each outcome does to the key.
//!
//! | reconcile outcome            | key                                              | counted in                 |
//! |------------------------------|--------------------------------------------------|----------------------------|
//! | object gone from the cache   | [`done`](crate::Claim::done); no reconcile       | `reconcile_not_found_total`|
//! | `Ok(AwaitChange)`            | `done` (backoff cleared)                         | `reconcile_success_total`  |
//! | `Ok(RequeueAfter(d))`        | `done`, then `add_after(d)` (backoff cleared)    | `reconcile_requeue_after_total` |
//! | `Err(e)`, retried            | [`retry`](crate::Claim::retry) (per-key backoff) | `reconcile_error_total`    |
//! | `Err(e)`, terminal           | `done`: not retried                              | `reconcile_error_total`, `reconcile_terminal_error_total` |
//! | panicked                     | `retry`                                          | `reconcile_panics_total`   |
//! | exceeded the timeout         | cancelled (dropped), then `retry`                | `reconcile_timeouts_total` |
//!
//! `RequeueAfter` is `done` followed by `add_after` rather than
//! [`retry_after`](crate::Claim::retry_after), because `retry_after` keeps the key's failure
//! count: a key that failed five times and then asked to be looked at again in an hour would
//! otherwise resume its backoff at the sixth step on its next failure. If the key was re-added
//! while it was being reconciled, it is already queued and `add_after` leaves it so (sooner
//! wins); an event before the delay passes reconciles it at once and replaces the requeue.
//!
//! The queue hands a key to one worker at a time, so no key is ever reconciled twice at once,
//! and at most `workers` reconciles run at once. A panic is caught around the reconcile future,
//! so it costs the key a retry and never the worker.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use super::metrics::{Finished, Shared};
use super::reconciler::{OnError, Reconciler};
use super::Action;
use crate::{Claim, ObjectKey, WorkQueue};

/// What a controller finishes before [`run`](super::Controller::run) returns on shutdown.
/// Either way the queue takes no new keys once shutdown begins, and retries are dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Drain {
    /// Finish the reconciles running now; keys still queued are dropped (as client-go and
    /// controller-runtime). The default: shutdown takes at most one reconcile's time (bounded
    /// by the reconcile timeout).
    #[default]
    InFlight,
    /// Finish the running reconciles and every key already queued (delayed keys are dropped).
    Backlog,
}

/// Looks an object up by key: the main informer's cache.
pub(crate) type Lookup<K> = Arc<dyn Fn(&ObjectKey) -> Option<Arc<K>> + Send + Sync>;

/// Everything a worker needs; shared by all of them.
pub(crate) struct Pool<K, R, C> {
    /// Where keys come from.
    pub(crate) queue: WorkQueue<ObjectKey>,
    /// Where objects come from.
    pub(crate) lookup: Lookup<K>,
    /// The user's code.
    pub(crate) reconciler: Arc<R>,
    /// The user's context, the same for every reconcile.
    pub(crate) context: Arc<C>,
    /// How long a reconcile may take before it is cancelled.
    pub(crate) timeout: Duration,
    /// Counters and the name.
    pub(crate) shared: Arc<Shared>,
}

impl<K, R, C> Pool<K, R, C>
where
    K: Send + Sync + 'static,
    R: Reconciler<K, C>,
    C: Send + Sync + 'static,
{
    /// Runs `workers` workers until `shutdown` resolves, then shuts the queue down and waits
    /// for what `drain` says.
    ///
    /// Cancel-safe in the sense that dropping it aborts the workers (cancelling their
    /// reconciles, whose keys are then retried) and shuts the queue down.
    pub(crate) async fn run(
        self,
        workers: usize,
        drain: Drain,
        shutdown: impl Future<Output = ()>,
    ) {
        let pool = Arc::new(self);
        let queue = pool.queue.clone();
        let _shut_down_on_drop = ShutDownOnDrop(queue.clone());
        let (stop, stopped) = watch::channel(());
        let mut tasks = JoinSet::new();
        for _ in 0..workers.max(1) {
            tasks.spawn(Arc::clone(&pool).work(stopped.clone(), drain));
        }
        drop(stopped);
        shutdown.await;
        tracing::debug!(controller = %pool.shared.name(), ?drain, "shutting down");
        // Stop the workers before shutting the queue down, which wakes them: a worker woken
        // by the shutdown then sees the stop first and takes nothing more (InFlight).
        drop(stop);
        queue.shut_down();
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined {
                tracing::error!(controller = %pool.shared.name(), error = %e, "worker ended abnormally");
            }
        }
    }

    /// One worker: claims and processes keys until told to stop or the queue is done.
    async fn work(self: Arc<Self>, mut stopped: watch::Receiver<()>, drain: Drain) {
        loop {
            let claim = match drain {
                Drain::InFlight => tokio::select! {
                    biased;
                    _ = stopped.changed() => return,
                    claim = self.queue.next() => claim,
                },
                Drain::Backlog => self.queue.next().await,
            };
            let Some(claim) = claim else { return };
            self.process(claim).await;
        }
    }

    /// Reconciles one claimed key and finishes the claim according to the outcome.
    pub(crate) async fn process(&self, claim: Claim<ObjectKey>) {
        let key = claim.key().clone();
        let span = tracing::info_span!("reconcile", controller = %self.shared.name(), key = %key);
        self.process_in_span(claim, key).instrument(span).await;
    }

    async fn process_in_span(&self, claim: Claim<ObjectKey>, key: ObjectKey) {
        let Some(object) = (self.lookup)(&key) else {
            tracing::debug!("object not in the cache (deleted); skipping reconcile");
            self.shared.not_found();
            claim.done();
            return;
        };
        let failures = claim.failures();
        self.shared.started();
        let start = Instant::now();
        let reconcile = AssertUnwindSafe(async {
            self.reconciler
                .reconcile(object, Arc::clone(&self.context))
                .await
        })
        .catch_unwind();
        let outcome = tokio::time::timeout(self.timeout, reconcile).await;
        let took = start.elapsed();
        let finished = match outcome {
            Ok(Ok(Ok(Action::AwaitChange))) => {
                claim.done();
                Finished::Success
            }
            Ok(Ok(Ok(Action::RequeueAfter(after)))) => {
                claim.done();
                self.queue.add_after(key, after);
                Finished::RequeueAfter
            }
            Ok(Ok(Err(error))) => match self.reconciler.on_error(&error) {
                OnError::Retry => {
                    tracing::warn!(%error, failures, "reconcile failed; retrying with backoff");
                    claim.retry();
                    Finished::Error
                }
                OnError::Terminal => {
                    tracing::error!(%error, "reconcile failed with a terminal error; not retrying");
                    claim.done();
                    Finished::TerminalError
                }
            },
            Ok(Err(panic)) => {
                tracing::error!(
                    panic = panic_message(panic.as_ref()),
                    failures,
                    "reconcile panicked; retrying with backoff"
                );
                claim.retry();
                Finished::Panicked
            }
            Err(_elapsed) => {
                tracing::warn!(
                    timeout = ?self.timeout,
                    failures,
                    "reconcile timed out and was cancelled; retrying with backoff"
                );
                claim.retry();
                Finished::TimedOut
            }
        };
        self.shared.finished(finished, took);
    }
}

/// The message of a panic payload, when it has one.
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(non-string panic payload)"
    }
}

/// Shuts the queue down when dropped, so a cancelled `run` leaves no queue taking keys.
struct ShutDownOnDrop(WorkQueue<ObjectKey>);

impl Drop for ShutDownOnDrop {
    fn drop(&mut self) {
        self.0.shut_down();
    }
}

#[cfg(test)]
#[path = "workers_tests.rs"]
mod tests;
