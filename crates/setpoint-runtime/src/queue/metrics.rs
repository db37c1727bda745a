//! The queue's metrics: client-go's work-queue set, kept as plain counters in the queue and
//! read as a [`QueueMetrics`] snapshot. Exporters (Prometheus text and so on) render
//! snapshots; the queue itself depends on none of them.

use std::time::Duration;

/// Count and sum of a set of durations: enough for a rate and a mean, and for a Prometheus
/// summary's `_count` and `_sum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    /// How many durations were recorded.
    pub count: u64,
    /// Their sum.
    pub sum: Duration,
}

impl Timing {
    /// Records one duration.
    fn record(&mut self, d: Duration) {
        self.count += 1;
        self.sum = self.sum.saturating_add(d);
    }

    /// Mean of the recorded durations (zero if none).
    pub fn mean(&self) -> Duration {
        match u32::try_from(self.count) {
            Ok(0) => Duration::ZERO,
            Ok(n) => self.sum / n,
            Err(_) => Duration::from_secs_f64(self.sum.as_secs_f64() / self.count as f64),
        }
    }
}

/// A snapshot of a work queue's metrics. Names follow controller-runtime's `workqueue_*`
/// metrics, so existing dashboards map one to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueMetrics {
    /// Keys waiting to be processed, including re-adds deferred behind a worker
    /// (`workqueue_depth`).
    pub depth: usize,
    /// Keys waiting for a delay to pass (not part of client-go's set).
    pub delayed: usize,
    /// Adds that were not coalesced into a key already waiting (`workqueue_adds_total`).
    pub adds_total: u64,
    /// Delayed adds, including every retry (`workqueue_retries_total`).
    pub retries_total: u64,
    /// Time from a key's first add to a worker claiming it (`workqueue_queue_duration_seconds`).
    pub queue_duration: Timing,
    /// Time from claim to done or retry (`workqueue_work_duration_seconds`).
    pub work_duration: Timing,
    /// Sum of how long each current claim has been held
    /// (`workqueue_unfinished_work_seconds`).
    pub unfinished_work: Duration,
    /// How long the oldest current claim has been held
    /// (`workqueue_longest_running_processor_seconds`).
    pub longest_running_processor: Duration,
}

/// The running counters behind [`QueueMetrics`]; the gauges are computed at snapshot time.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Non-coalesced adds.
    pub(crate) adds_total: u64,
    /// Delayed adds.
    pub(crate) retries_total: u64,
    /// Add-to-claim times.
    queue_duration: Timing,
    /// Claim-to-release times.
    work_duration: Timing,
}

impl Counters {
    /// Records a claim that waited `waited` in the queue.
    pub(crate) fn claimed(&mut self, waited: Duration) {
        self.queue_duration.record(waited);
    }

    /// Records a claim released after `held`.
    pub(crate) fn released(&mut self, held: Duration) {
        self.work_duration.record(held);
    }

    /// A snapshot, given the gauges.
    pub(crate) fn snapshot(
        &self,
        depth: usize,
        delayed: usize,
        (unfinished_work, longest_running_processor): (Duration, Duration),
    ) -> QueueMetrics {
        QueueMetrics {
            depth,
            delayed,
            adds_total: self.adds_total,
            retries_total: self.retries_total,
            queue_duration: self.queue_duration,
            work_duration: self.work_duration,
            unfinished_work,
            longest_running_processor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_mean_should_be_zero_when_empty_and_average_otherwise() {
        let mut t = Timing::default();
        assert_eq!(t.mean(), Duration::ZERO);
        t.record(Duration::from_millis(10));
        t.record(Duration::from_millis(30));
        assert_eq!(
            t,
            Timing {
                count: 2,
                sum: Duration::from_millis(40)
            }
        );
        assert_eq!(t.mean(), Duration::from_millis(20));
    }
}
