//! How each component's snapshot is written as Prometheus metrics: the names, labels, types
//! and help texts listed in `docs/design/runtime.md` ("Metrics").
//!
//! Names are controller-runtime's where it has one (work queues, controllers, leader
//! election); informer metrics, and the few counters controller-runtime lacks, carry a
//! `setpoint_` prefix.

use super::encoder::Encoder;
use crate::{ControllerMetrics, InformerMetrics, QueueMetrics};

/// Writes a work queue's metrics, labelled `name` and `controller` (controller-runtime
/// names a controller's queue after it, so both carry the same value).
pub(super) fn encode_queue(e: &mut Encoder, name: &str, m: &QueueMetrics) {
    let labels = [("name", name), ("controller", name)];
    e.gauge(
        "workqueue_depth",
        "Keys waiting in the work queue, including re-adds deferred behind a worker",
        &labels,
        m.depth as f64,
    );
    e.counter(
        "workqueue_adds_total",
        "Keys added to the work queue and not coalesced with one already waiting",
        &labels,
        m.adds_total,
    );
    e.histogram(
        "workqueue_queue_duration_seconds",
        "Time from a key's first add to a worker claiming it",
        &labels,
        &m.queue_duration,
    );
    e.histogram(
        "workqueue_work_duration_seconds",
        "Time from a worker claiming a key to finishing or retrying it",
        &labels,
        &m.work_duration,
    );
    e.gauge(
        "workqueue_unfinished_work_seconds",
        "Sum of how long each current claim has been held; growing steadily means stuck \
         workers (its rate of increase is how many)",
        &labels,
        m.unfinished_work.as_secs_f64(),
    );
    e.gauge(
        "workqueue_longest_running_processor_seconds",
        "How long the oldest current claim has been held",
        &labels,
        m.longest_running_processor.as_secs_f64(),
    );
    e.counter(
        "workqueue_retries_total",
        "Delayed adds to the work queue, every retry included",
        &labels,
        m.retries_total,
    );
    e.gauge(
        "setpoint_workqueue_delayed",
        "Keys waiting in the workqueue for a delay (a retry backoff or a requeue) to pass",
        &labels,
        m.delayed as f64,
    );
}

/// Writes a controller's metrics, labelled `controller`.
///
/// controller-runtime's mapping: a reconcile that panicked or timed out ended in an error,
/// so it counts in `result="error"` and `controller_runtime_reconcile_errors_total` as well
/// as in its own counter. The `result` values thus partition all reconciles.
pub(super) fn encode_controller(e: &mut Encoder, controller: &str, m: &ControllerMetrics) {
    let labels = [("controller", controller)];
    let errors = m
        .reconcile_error_total
        .saturating_add(m.reconcile_panics_total)
        .saturating_add(m.reconcile_timeouts_total);
    for (result, n) in [
        ("success", m.reconcile_success_total),
        ("error", errors),
        ("requeue_after", m.reconcile_requeue_after_total),
    ] {
        e.counter(
            "controller_runtime_reconcile_total",
            "Reconciles finished, by result (error includes panics and timeouts)",
            &[("controller", controller), ("result", result)],
            n,
        );
    }
    e.counter(
        "controller_runtime_reconcile_errors_total",
        "Reconciles that ended in an error, a panic or a timeout",
        &labels,
        errors,
    );
    e.counter(
        "controller_runtime_terminal_reconcile_errors_total",
        "Reconciles that ended in an error marked terminal (not retried)",
        &labels,
        m.reconcile_terminal_error_total,
    );
    e.counter(
        "controller_runtime_reconcile_panics_total",
        "Reconciles that panicked",
        &labels,
        m.reconcile_panics_total,
    );
    e.counter(
        "controller_runtime_reconcile_timeouts_total",
        "Reconciles cancelled by the reconcile timeout",
        &labels,
        m.reconcile_timeouts_total,
    );
    e.histogram(
        "controller_runtime_reconcile_time_seconds",
        "How long reconciles took",
        &labels,
        &m.reconcile_duration,
    );
    e.gauge(
        "controller_runtime_active_workers",
        "Reconciles running now",
        &labels,
        m.active_workers as f64,
    );
    e.gauge(
        "controller_runtime_max_concurrent_reconciles",
        "How many reconciles the controller runs at most at once",
        &labels,
        m.max_concurrent_reconciles as f64,
    );
    e.counter(
        "setpoint_controller_not_found_total",
        "Keys taken from the queue whose object was gone from the cache, so no reconcile ran",
        &labels,
        m.reconcile_not_found_total,
    );
}

/// Writes an informer's metrics, labelled `resource`.
pub(super) fn encode_informer(e: &mut Encoder, resource: &str, m: &InformerMetrics) {
    let labels = [("resource", resource)];
    let counters = [
        (
            "setpoint_informer_lists_total",
            "Complete lists (initial lists and relists) applied to the informer's cache",
            m.lists_total,
        ),
        (
            "setpoint_informer_relists_total",
            "Lists after the first, after a watch expired (410 Gone) or failed",
            m.relists_total,
        ),
        (
            "setpoint_informer_watches_total",
            "Watch requests started",
            m.watches_total,
        ),
        (
            "setpoint_informer_watch_restarts_total",
            "Watches renewed after ending or failing",
            m.watch_restarts_total,
        ),
        (
            "setpoint_informer_watch_errors_total",
            "Lists and watches that failed",
            m.watch_errors_total,
        ),
        (
            "setpoint_informer_events_total",
            "Watch events applied to the informer's cache",
            m.events_total,
        ),
    ];
    for (name, help, value) in counters {
        e.counter(name, help, &labels, value);
    }
    e.gauge(
        "setpoint_informer_objects",
        "Objects in the informer's cache",
        &labels,
        m.objects as f64,
    );
    e.gauge(
        "setpoint_informer_synced",
        "Whether the informer's cache has applied a complete list (1) or not yet (0)",
        &labels,
        f64::from(u8::from(m.synced)),
    );
}

/// Writes whether this process leads the election `name`.
pub(super) fn encode_leader_election(e: &mut Encoder, name: &str, is_leading: bool) {
    e.gauge(
        "leader_election_master_status",
        "Whether this process holds the election's lease now (1) or stands by (0)",
        &[("name", name)],
        f64::from(u8::from(is_leading)),
    );
}
