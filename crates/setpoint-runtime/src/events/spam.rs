//! The spam filter: one token bucket per regarding object, so a controller stuck in a hot loop
//! cannot flood the API with Events about one object. client-go's defaults: a burst of 25, then
//! one more every 5 minutes.

use std::hash::Hash;

use tokio::time::{Duration, Instant};

use super::lru::Lru;

/// A token bucket refilled continuously, one token per `refill`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Tokens available at `at` (0 ..= burst).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

/// Per-key token buckets, at most `capacity` of them (the least recently used are forgotten,
/// which only ever makes the filter more lenient for the forgotten key).
#[derive(Debug)]
pub(crate) struct SpamFilter<K> {
    buckets: Lru<K, Bucket>,
    burst: f64,
    refill: Duration,
}

impl<K: Eq + Hash + Clone> SpamFilter<K> {
    pub(crate) fn new(burst: u32, refill: Duration, capacity: usize) -> Self {
        SpamFilter {
            buckets: Lru::new(capacity),
            burst: f64::from(burst),
            refill,
        }
    }

    /// Takes a token for `key` at `now`; `false` if it has none left.
    pub(crate) fn allow(&mut self, key: &K, now: Instant) -> bool {
        let (burst, refill) = (self.burst, self.refill);
        let bucket = match self.buckets.get_mut(key) {
            Some(bucket) => bucket,
            None => {
                self.buckets.insert(
                    key.clone(),
                    Bucket {
                        tokens: burst,
                        at: now,
                    },
                );
                match self.buckets.get_mut(key) {
                    Some(bucket) => bucket,
                    None => return false,
                }
            }
        };
        let elapsed = now.saturating_duration_since(bucket.at);
        let earned = if refill.is_zero() {
            burst
        } else {
            elapsed.as_secs_f64() / refill.as_secs_f64()
        };
        bucket.tokens = (bucket.tokens + earned).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn spam_filter_should_allow_a_burst_then_one_per_refill() {
        let mut filter = SpamFilter::new(25, Duration::from_secs(300), 16);
        let now = Instant::now();
        let allowed = (0..100).filter(|_| filter.allow(&"pod", now)).count();
        assert_eq!(allowed, 25);
        // Another object has its own bucket.
        assert!(filter.allow(&"other", now));

        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!filter.allow(&"pod", Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(filter.allow(&"pod", Instant::now()));
        assert!(!filter.allow(&"pod", Instant::now()));

        // A long quiet spell refills to the burst, no further.
        tokio::time::advance(Duration::from_secs(3600 * 24)).await;
        let allowed = (0..100)
            .filter(|_| filter.allow(&"pod", Instant::now()))
            .count();
        assert_eq!(allowed, 25);
    }

    #[tokio::test(start_paused = true)]
    async fn spam_filter_should_stay_within_its_capacity() {
        let mut filter = SpamFilter::new(1, Duration::from_secs(300), 4);
        let now = Instant::now();
        for key in 0..100 {
            assert!(filter.allow(&key, now));
        }
        assert_eq!(filter.buckets.len(), 4);
    }
}
