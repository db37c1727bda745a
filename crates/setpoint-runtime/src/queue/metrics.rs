//! The queue's metrics: client-go's work-queue set, kept as plain counters in the queue and
//! read as a [`QueueMetrics`] snapshot. Exporters (the Prometheus text in `metrics`, or any
//! other) render snapshots; the queue itself depends on none of them.
//!
//! Durations are kept as a [`Timing`]: a count, a sum and a fixed histogram, cheap enough to
//! record under the queue's lock and to copy out whole in a snapshot.

use std::time::Duration;

/// How many finite histogram buckets a [`Timing`] has (the `+Inf` bucket is its `count`).
const BUCKETS: usize = 28;

/// The finite buckets' upper bounds, inclusive, in nanoseconds, each with the `le` label
/// Prometheus clients write for it. Strictly increasing.
///
/// One layout for every duration in the SDK: 1, 2.5 and 5 times each power of ten from 1 µs
/// to 1,000 s. It holds Prometheus' default buckets (5 ms … 10 s) and every decade of
/// client-go's work-queue layout from 1 µs up, so it resolves both sub-millisecond queue
/// latencies and reconciles of seconds to minutes, at 2.5× resolution everywhere.
const BOUNDS: [(u64, &str); BUCKETS] = [
    (1_000, "1e-06"),
    (2_500, "2.5e-06"),
    (5_000, "5e-06"),
    (10_000, "1e-05"),
    (25_000, "2.5e-05"),
    (50_000, "5e-05"),
    (100_000, "0.0001"),
    (250_000, "0.00025"),
    (500_000, "0.0005"),
    (1_000_000, "0.001"),
    (2_500_000, "0.0025"),
    (5_000_000, "0.005"),
    (10_000_000, "0.01"),
    (25_000_000, "0.025"),
    (50_000_000, "0.05"),
    (100_000_000, "0.1"),
    (250_000_000, "0.25"),
    (500_000_000, "0.5"),
    (1_000_000_000, "1"),
    (2_500_000_000, "2.5"),
    (5_000_000_000, "5"),
    (10_000_000_000, "10"),
    (25_000_000_000, "25"),
    (50_000_000_000, "50"),
    (100_000_000_000, "100"),
    (250_000_000_000, "250"),
    (500_000_000_000, "500"),
    (1_000_000_000_000, "1000"),
];

/// Count, sum and histogram of a set of durations: enough for a rate, a mean and quantile
/// estimates, and for a Prometheus histogram's `_bucket`, `_sum` and `_count`.
///
/// The buckets are fixed (see [`buckets`](Self::buckets)): 1, 2.5 and 5 times each power of
/// ten from 1 µs to 1,000 s, upper bounds inclusive; longer durations count only towards
/// `count` (Prometheus' `+Inf` bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    /// How many durations were recorded.
    pub count: u64,
    /// Their sum (saturating).
    pub sum: Duration,
    /// Durations per bucket, not cumulative: `per_bucket[i]` counts those in
    /// `(BOUNDS[i-1], BOUNDS[i]]`. Their total is at most `count`; the difference is the
    /// durations above the last bound.
    per_bucket: [u64; BUCKETS],
}

impl Timing {
    /// Records one duration.
    pub(crate) fn record(&mut self, d: Duration) {
        self.count += 1;
        self.sum = self.sum.saturating_add(d);
        let nanos = d.as_nanos();
        let i = BOUNDS.partition_point(|&(bound, _)| u128::from(bound) < nanos);
        if let Some(n) = self.per_bucket.get_mut(i) {
            *n += 1;
        }
    }

    /// Mean of the recorded durations (zero if none).
    pub fn mean(&self) -> Duration {
        match u32::try_from(self.count) {
            Ok(0) => Duration::ZERO,
            Ok(n) => self.sum / n,
            Err(_) => Duration::from_secs_f64(self.sum.as_secs_f64() / self.count as f64),
        }
    }

    /// The histogram, cumulative as Prometheus has it: for each finite bucket, in increasing
    /// order, its upper bound and how many durations were at most that long. The implicit
    /// last bucket (`+Inf`) is [`count`](Self::count).
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.cumulative()
            .map(|((bound, _), n)| (Duration::from_nanos(bound), n))
    }

    /// The histogram as [`buckets`](Self::buckets), with each bound as the `le` label value
    /// Prometheus clients write for it.
    pub(crate) fn buckets_le(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.cumulative().map(|((_, le), n)| (le, n))
    }

    fn cumulative(&self) -> impl Iterator<Item = ((u64, &'static str), u64)> + '_ {
        BOUNDS
            .iter()
            .zip(self.per_bucket.iter())
            .scan(0u64, |total, (&bound, &n)| {
                *total += n;
                Some((bound, *total))
            })
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn timing_mean_should_be_zero_when_empty_and_average_otherwise() {
        let mut t = Timing::default();
        assert_eq!(t.mean(), Duration::ZERO);
        t.record(ms(10));
        t.record(ms(30));
        assert_eq!((t.count, t.sum), (2, ms(40)));
        assert_eq!(t.mean(), ms(20));
    }

    #[test]
    fn timing_should_count_each_duration_in_the_first_bucket_that_holds_it() {
        let mut t = Timing::default();
        t.record(Duration::ZERO); // first bucket
        t.record(ms(5)); // exactly on a bound: that bucket (bounds are inclusive)
        t.record(ms(5) + Duration::from_nanos(1)); // just above: the next one
        t.record(Duration::from_secs(5_000)); // above every bound: only +Inf
        let at = |bound: Duration| {
            t.buckets()
                .find(|&(b, _)| b == bound)
                .map(|(_, n)| n)
                .expect("a bound of the layout")
        };
        assert_eq!(at(Duration::from_micros(1)), 1);
        assert_eq!(at(Duration::from_micros(2_500)), 1);
        assert_eq!(at(ms(5)), 2);
        assert_eq!(at(ms(10)), 3);
        assert_eq!(at(Duration::from_secs(1_000)), 3);
        assert_eq!(t.count, 4);
    }

    #[test]
    fn timing_buckets_should_be_cumulative_and_increasing() {
        let mut t = Timing::default();
        for micros in [0, 3, 70, 900, 12_000, 400_000, 7_000_000, 70_000_000] {
            t.record(Duration::from_micros(micros));
        }
        let buckets: Vec<_> = t.buckets().collect();
        assert_eq!(buckets.len(), BUCKETS);
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(buckets.last().map(|&(_, n)| n), Some(t.count));
    }

    #[test]
    fn bucket_labels_should_name_their_bounds() {
        for (nanos, le) in BOUNDS {
            let seconds: f64 = le.parse().expect("a float");
            assert_eq!((seconds * 1e9).round() as u64, nanos, "{le}");
        }
    }
}
