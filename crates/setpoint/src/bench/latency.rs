//! Latency recording for benchmarks: an HDR histogram at microsecond precision for the many
//! operations of a load run, and exact percentiles of a handful of timed repetitions.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Latencies of many operations, in microseconds with three significant digits. Each task
/// records into its own and the results are merged, so recording takes no lock.
pub(crate) struct Latencies {
    /// Microseconds, from 1 µs to [`MAX_MICROS`]; larger values are recorded as the maximum.
    histogram: Histogram<u64>,
}

/// The largest latency told apart: one hour. (hdrhistogram's auto-resizing does not apply to
/// its saturating records, so the bound is explicit.)
const MAX_MICROS: u64 = 3_600_000_000;

/// The headline numbers of a set of latencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    /// How many latencies were recorded.
    pub(crate) count: u64,
    /// The median.
    pub(crate) p50: Duration,
    /// The 99th percentile.
    pub(crate) p99: Duration,
    /// The largest.
    pub(crate) max: Duration,
}

impl Latencies {
    /// An empty set.
    pub(crate) fn new() -> Self {
        Latencies {
            histogram: Histogram::new_with_bounds(1, MAX_MICROS, 3)
                .expect("1 µs to an hour at 3 significant digits is a valid range"),
        }
    }

    /// Records one latency.
    pub(crate) fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.histogram.saturating_record(micros);
    }

    /// Adds every latency of `other` to this set.
    pub(crate) fn merge(&mut self, other: &Latencies) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms of equal range and precision always add");
    }

    /// The median, 99th percentile and maximum (all zero when empty).
    pub(crate) fn summary(&self) -> Summary {
        let at = |q: f64| Duration::from_micros(self.histogram.value_at_quantile(q));
        Summary {
            count: self.histogram.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: Duration::from_micros(self.histogram.max()),
        }
    }
}

/// The exact median, 99th percentile and maximum of a few timed repetitions (all zero when
/// there are none). Percentiles are nearest-rank: the smallest sample at or above the quantile.
pub(crate) fn summarize_samples(samples: &[Duration]) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = |q: f64| {
        // Nearest rank: ceil(q·n), 1-based.
        let rank = (q * sorted.len() as f64).ceil() as usize;
        sorted
            .get(rank.saturating_sub(1))
            .copied()
            .unwrap_or_default()
    };
    Summary {
        count: sorted.len() as u64,
        p50: rank(0.5),
        p99: rank(0.99),
        max: sorted.last().copied().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_should_report_percentiles_of_merged_sets() {
        let mut a = Latencies::new();
        let mut b = Latencies::new();
        for micros in 1..=50 {
            a.record(Duration::from_micros(micros));
        }
        for micros in 51..=100 {
            b.record(Duration::from_micros(micros));
        }
        a.merge(&b);
        let summary = a.summary();
        assert_eq!(summary.count, 100);
        assert_eq!(summary.p50, Duration::from_micros(50));
        assert_eq!(summary.p99, Duration::from_micros(99));
        assert_eq!(summary.max, Duration::from_micros(100));
    }

    #[test]
    fn latencies_should_keep_slow_operations_unclamped() {
        let mut latencies = Latencies::new();
        latencies.record(Duration::from_millis(5));
        latencies.record(Duration::from_secs(10));
        latencies.record(Duration::from_secs(1_000_000));
        let summary = latencies.summary();
        assert!(
            summary.p50.abs_diff(Duration::from_secs(10)) < Duration::from_millis(10),
            "{summary:?}"
        );
        assert!(summary.max >= Duration::from_secs(3_599), "{summary:?}");
    }

    #[test]
    fn samples_should_use_nearest_rank_percentiles() {
        let samples: Vec<_> = (1..=10).rev().map(Duration::from_millis).collect();
        let summary = summarize_samples(&samples);
        assert_eq!(summary.p50, Duration::from_millis(5));
        assert_eq!(summary.p99, Duration::from_millis(10));
        assert_eq!(summary.max, Duration::from_millis(10));
        assert_eq!(summarize_samples(&[]).max, Duration::ZERO);
    }
}
