//! How long a failing watcher waits before trying again: exponential backoff with jitter that
//! resets after a healthy spell — client-go's reflector backoff (800 ms doubling to 30 s,
//! reset after 2 minutes without a failure).
//!
//! Each delay is drawn uniformly from `[(1 − jitter)·d, d]` where `d = min(initial·2ⁿ, max)`
//! and `n` counts the failures since the last reset, so delays never exceed `max` and many
//! watchers failing together (an API server restart) spread their retries out.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// The watcher's retry policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchBackoff {
    /// The nominal delay after the first failure.
    pub initial: Duration,
    /// The nominal delay never exceeds this (nor does the jittered one).
    pub max: Duration,
    /// How much of each nominal delay may be taken off at random, in `[0, 1]`.
    pub jitter: f64,
    /// After this long without a failure, the next failure waits `initial` again.
    pub reset_after: Duration,
}

impl Default for WatchBackoff {
    /// 800 ms doubling to 30 s, up to half of each delay taken off at random, reset after
    /// 2 minutes without a failure.
    fn default() -> Self {
        WatchBackoff {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            jitter: 0.5,
            reset_after: Duration::from_secs(120),
        }
    }
}

impl WatchBackoff {
    /// The nominal (unjittered) delay after `failures` earlier failures since the last reset.
    pub fn nominal(&self, failures: u32) -> Duration {
        2u32.checked_pow(failures)
            .and_then(|factor| self.initial.checked_mul(factor))
            .map_or(self.max, |d| d.min(self.max))
    }
}

/// A watcher's running backoff: failures since the last reset, and its random source.
#[derive(Debug)]
pub(crate) struct BackoffState {
    config: WatchBackoff,
    /// Failures since the last reset.
    failures: u32,
    /// When the last failure happened; `None` before the first.
    last_failure: Option<Instant>,
    rng: SmallRng,
}

impl BackoffState {
    /// A fresh backoff, randomised from entropy.
    pub(crate) fn new(config: WatchBackoff) -> BackoffState {
        Self::with_rng(config, SmallRng::from_entropy())
    }

    /// A fresh backoff with a given random source (tests seed it).
    pub(crate) fn with_rng(config: WatchBackoff, rng: SmallRng) -> BackoffState {
        BackoffState {
            config,
            failures: 0,
            last_failure: None,
            rng,
        }
    }

    /// Records a failure at `now` and returns how long to wait before the next attempt.
    pub(crate) fn next_delay(&mut self, now: Instant) -> Duration {
        if let Some(last) = self.last_failure {
            if now.saturating_duration_since(last) >= self.config.reset_after {
                self.failures = 0;
            }
        }
        self.last_failure = Some(now);
        let nominal = self.config.nominal(self.failures);
        self.failures = self.failures.saturating_add(1);
        let jitter = self.config.jitter.clamp(0.0, 1.0);
        let cut = if jitter > 0.0 {
            self.rng.gen_range(0.0..=jitter)
        } else {
            0.0
        };
        nominal.mul_f64(1.0 - cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded() -> (BackoffState, u64) {
        let seed: u64 = rand::random();
        println!("backoff seed {seed}");
        (
            BackoffState::with_rng(WatchBackoff::default(), SmallRng::seed_from_u64(seed)),
            seed,
        )
    }

    fn assert_within(delay: Duration, nominal: Duration, seed: u64) {
        assert!(
            delay <= nominal && delay >= nominal.mul_f64(0.5),
            "delay {delay:?} outside [{:?}, {nominal:?}] (seed {seed})",
            nominal.mul_f64(0.5)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_should_double_from_800ms_to_a_30s_cap_within_jitter_bounds() {
        let (mut backoff, seed) = seeded();
        let expected_ms = [
            800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000, 30_000,
        ];
        for ms in expected_ms {
            let delay = backoff.next_delay(Instant::now());
            assert_within(delay, Duration::from_millis(ms), seed);
            tokio::time::sleep(delay).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_should_reset_after_two_minutes_without_failure() {
        let (mut backoff, seed) = seeded();
        let mut last = Instant::now();
        for _ in 0..6 {
            last = Instant::now();
            let delay = backoff.next_delay(last);
            tokio::time::sleep(delay).await;
        }
        // Healthy for just under two minutes: still escalated.
        tokio::time::sleep_until(last + Duration::from_secs(119)).await;
        last = Instant::now();
        assert_within(backoff.next_delay(last), Duration::from_secs(30), seed);
        // Healthy for two minutes: back to the start.
        tokio::time::sleep_until(last + Duration::from_secs(120)).await;
        assert_within(
            backoff.next_delay(Instant::now()),
            Duration::from_millis(800),
            seed,
        );
        assert_within(
            backoff.next_delay(Instant::now()),
            Duration::from_millis(1_600),
            seed,
        );
    }

    #[test]
    fn backoff_should_not_overflow_after_many_failures() {
        let b = WatchBackoff::default();
        assert_eq!(b.nominal(u32::MAX), Duration::from_secs(30));
        assert_eq!(b.nominal(40), Duration::from_secs(30));
    }

    #[test]
    fn backoff_without_jitter_should_be_exact() {
        let config = WatchBackoff {
            jitter: 0.0,
            ..WatchBackoff::default()
        };
        let mut b = BackoffState::with_rng(config, SmallRng::seed_from_u64(1));
        let now = Instant::now();
        assert_eq!(b.next_delay(now), Duration::from_millis(800));
        assert_eq!(b.next_delay(now), Duration::from_millis(1_600));
    }
}
