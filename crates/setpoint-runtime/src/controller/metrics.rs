//! The controller's metrics: plain counters behind a [`ControllerHandle`], read as a
//! [`ControllerMetrics`] snapshot. Names follow controller-runtime's `controller_runtime_*`
//! metrics, so exporters can map them one to one; the controller depends on no exporter.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use crate::{ObjectKey, QueueMetrics, Timing, WorkQueue};

/// A snapshot of one controller's metrics.
///
/// Every finished reconcile is counted in exactly one of `reconcile_success_total`,
/// `reconcile_requeue_after_total`, `reconcile_error_total`, `reconcile_panics_total` and
/// `reconcile_timeouts_total`, and its duration in `reconcile_duration`, so their sum is
/// `reconcile_duration.count`. Keys whose object was gone are counted in
/// `reconcile_not_found_total` only (no reconcile ran).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControllerMetrics {
    /// Reconciles that returned [`Action::AwaitChange`](super::Action::AwaitChange)
    /// (`controller_runtime_reconcile_total{result="success"}`).
    pub reconcile_success_total: u64,
    /// Reconciles that returned [`Action::RequeueAfter`](super::Action::RequeueAfter)
    /// (`controller_runtime_reconcile_total{result="requeue_after"}`).
    pub reconcile_requeue_after_total: u64,
    /// Reconciles that returned an error, terminal or not
    /// (`controller_runtime_reconcile_errors_total`).
    pub reconcile_error_total: u64,
    /// Of those, errors the reconciler marked [terminal](super::OnError::Terminal) (not
    /// retried; `controller_runtime_terminal_reconcile_errors_total`).
    pub reconcile_terminal_error_total: u64,
    /// Reconciles that panicked (`controller_runtime_reconcile_panics_total`).
    pub reconcile_panics_total: u64,
    /// Reconciles cancelled by the reconcile timeout
    /// (`controller_runtime_reconcile_timeouts_total`).
    pub reconcile_timeouts_total: u64,
    /// Keys taken from the queue whose object was no longer in the cache, so no reconcile ran.
    pub reconcile_not_found_total: u64,
    /// How long reconciles took (`controller_runtime_reconcile_time_seconds`).
    pub reconcile_duration: Timing,
    /// Reconciles running now (`controller_runtime_active_workers`).
    pub active_workers: usize,
    /// The concurrency limit (`controller_runtime_max_concurrent_reconciles`).
    pub max_concurrent_reconciles: usize,
}

/// How a reconcile ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finished {
    /// `Ok(Action::AwaitChange)`.
    Success,
    /// `Ok(Action::RequeueAfter(_))`.
    RequeueAfter,
    /// `Err(_)`, retried.
    Error,
    /// `Err(_)`, terminal.
    TerminalError,
    /// Panicked.
    Panicked,
    /// Cancelled by the timeout.
    TimedOut,
}

/// State shared by a controller, its workers and every [`ControllerHandle`].
#[derive(Debug)]
pub(crate) struct Shared {
    /// The controller's name (set by the builder; read by handles).
    name: Mutex<Arc<str>>,
    /// The counters.
    metrics: Mutex<ControllerMetrics>,
    /// The work queue, once the controller runs.
    queue: OnceLock<WorkQueue<ObjectKey>>,
}

impl Shared {
    pub(crate) fn new(name: &str, max_concurrent_reconciles: usize) -> Arc<Shared> {
        Arc::new(Shared {
            name: Mutex::new(Arc::from(name)),
            metrics: Mutex::new(ControllerMetrics {
                max_concurrent_reconciles,
                ..ControllerMetrics::default()
            }),
            queue: OnceLock::new(),
        })
    }

    pub(crate) fn name(&self) -> Arc<str> {
        Arc::clone(&self.name.lock())
    }

    pub(crate) fn set_name(&self, name: &str) {
        *self.name.lock() = Arc::from(name);
    }

    pub(crate) fn set_max_concurrent_reconciles(&self, n: usize) {
        self.metrics.lock().max_concurrent_reconciles = n;
    }

    /// Makes `queue` the one handles report on (the first one set wins).
    pub(crate) fn set_queue(&self, queue: &WorkQueue<ObjectKey>) {
        let _ = self.queue.set(queue.clone());
    }

    /// A reconcile started.
    pub(crate) fn started(&self) {
        self.metrics.lock().active_workers += 1;
    }

    /// A reconcile that started has finished after `took`.
    pub(crate) fn finished(&self, how: Finished, took: Duration) {
        let mut m = self.metrics.lock();
        m.active_workers = m.active_workers.saturating_sub(1);
        m.reconcile_duration.record(took);
        match how {
            Finished::Success => m.reconcile_success_total += 1,
            Finished::RequeueAfter => m.reconcile_requeue_after_total += 1,
            Finished::Error => m.reconcile_error_total += 1,
            Finished::TerminalError => {
                m.reconcile_error_total += 1;
                m.reconcile_terminal_error_total += 1;
            }
            Finished::Panicked => m.reconcile_panics_total += 1,
            Finished::TimedOut => m.reconcile_timeouts_total += 1,
        }
    }

    /// A key's object was gone, so no reconcile ran.
    pub(crate) fn not_found(&self) {
        self.metrics.lock().reconcile_not_found_total += 1;
    }
}

/// A cloneable, read-only view of a controller, for metrics exporters and health checks.
/// Taken with [`Controller::handle`](super::Controller::handle) before
/// [`run`](super::Controller::run) consumes the controller; stays valid after it returns.
#[derive(Debug, Clone)]
pub struct ControllerHandle {
    shared: Arc<Shared>,
}

impl ControllerHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> ControllerHandle {
        ControllerHandle { shared }
    }

    /// The controller's name (as in its logs).
    pub fn name(&self) -> String {
        self.shared.name().to_string()
    }

    /// A snapshot of the controller's metrics.
    pub fn metrics(&self) -> ControllerMetrics {
        *self.shared.metrics.lock()
    }

    /// A snapshot of its work queue's metrics (all zero until the controller runs).
    pub fn queue_metrics(&self) -> QueueMetrics {
        self.shared
            .queue
            .get()
            .map(WorkQueue::metrics)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_finished_reconcile_should_be_counted_once_with_its_duration() {
        let shared = Shared::new("things", 2);
        let handle = ControllerHandle::new(Arc::clone(&shared));
        let all = [
            Finished::Success,
            Finished::RequeueAfter,
            Finished::Error,
            Finished::TerminalError,
            Finished::Panicked,
            Finished::TimedOut,
        ];
        for how in all {
            shared.started();
            shared.finished(how, Duration::from_millis(10));
        }
        shared.not_found();
        let m = handle.metrics();
        assert_eq!(
            m,
            ControllerMetrics {
                reconcile_success_total: 1,
                reconcile_requeue_after_total: 1,
                reconcile_error_total: 2,
                reconcile_terminal_error_total: 1,
                reconcile_panics_total: 1,
                reconcile_timeouts_total: 1,
                reconcile_not_found_total: 1,
                reconcile_duration: m.reconcile_duration,
                active_workers: 0,
                max_concurrent_reconciles: 2,
            }
        );
        assert_eq!(m.reconcile_duration.count, 6);
        assert_eq!(m.reconcile_duration.sum, Duration::from_millis(60));
    }

    #[test]
    fn handle_should_track_active_workers_name_and_queue() {
        let shared = Shared::new("things", 2);
        let handle = ControllerHandle::new(Arc::clone(&shared));
        shared.started();
        shared.started();
        assert_eq!(handle.metrics().active_workers, 2);
        shared.set_name("renamed");
        assert_eq!(handle.name(), "renamed");
        assert_eq!(handle.queue_metrics(), QueueMetrics::default());
        let queue = WorkQueue::new();
        queue.add(ObjectKey::cluster("a"));
        shared.set_queue(&queue);
        assert_eq!(handle.queue_metrics().depth, 1);
    }
}
