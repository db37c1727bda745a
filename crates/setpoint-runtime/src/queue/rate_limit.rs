//! How long a failed key waits before it is retried: per-key exponential backoff under an
//! overall token bucket, the delay being the larger of the two — client-go's default
//! controller rate limiter (`MaxOf(ItemExponential(5ms, 1000s), Bucket(10/s, burst 100))`).
//!
//! Only retries ([`Claim::retry`](super::Claim::retry) and dropped claims) are limited; adds
//! from events never are. A key's backoff is cleared when a claim on it is
//! [`done`](super::Claim::done).

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::time::Duration;

use tokio::time::Instant;

/// Per-key exponential backoff: the n-th consecutive retry of a key waits `base · 2ⁿ⁻¹`,
/// capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
}

impl Backoff {
    /// Backoff from `base`, doubling up to `max` (a `max` below `base` is raised to `base`).
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
        }
    }

    /// The wait before the retry that follows `failures` earlier consecutive failures.
    pub fn delay(&self, failures: u32) -> Duration {
        2u32.checked_pow(failures)
            .and_then(|factor| self.base.checked_mul(factor))
            .map_or(self.max, |d| d.min(self.max))
    }
}

impl Default for Backoff {
    /// 5 ms doubling to 1,000 s, as client-go.
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1_000))
    }
}

/// An overall token bucket shared by all keys: `burst` retries at once, then `per_second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    per_second: NonZeroU32,
    burst: NonZeroU32,
}

impl TokenBucket {
    /// A bucket refilling `per_second` tokens a second and holding at most `burst`.
    pub fn new(per_second: NonZeroU32, burst: NonZeroU32) -> Self {
        Self { per_second, burst }
    }
}

impl Default for TokenBucket {
    /// 10 a second, burst 100, as client-go.
    fn default() -> Self {
        const TEN: NonZeroU32 = NonZeroU32::MIN.saturating_add(9);
        const HUNDRED: NonZeroU32 = NonZeroU32::MIN.saturating_add(99);
        Self::new(TEN, HUNDRED)
    }
}

/// How retries are delayed: per-key backoff and, optionally, an overall token bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Per-key backoff.
    pub backoff: Backoff,
    /// Overall limit on retries; `None` for no overall limit.
    pub bucket: Option<TokenBucket>,
}

impl Default for RateLimit {
    /// client-go's default controller rate limiter: [`Backoff::default`] under
    /// [`TokenBucket::default`].
    fn default() -> Self {
        Self {
            backoff: Backoff::default(),
            bucket: Some(TokenBucket::default()),
        }
    }
}

/// The bucket's running state, as golang.org/x/time/rate: tokens may go negative, which is
/// how far into the future the last reservation reaches.
#[derive(Debug)]
struct Tokens {
    config: TokenBucket,
    /// Tokens available at `at`; at most `config.burst`, negative when reserved ahead.
    tokens: f64,
    /// When `tokens` was computed.
    at: Instant,
}

impl Tokens {
    /// Takes one token at `now`, returning how long until it is actually available.
    fn reserve(&mut self, now: Instant) -> Duration {
        let rate = f64::from(self.config.per_second.get());
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(f64::from(self.config.burst.get()));
        self.at = self.at.max(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }
}

/// Per-key failure counts and the shared bucket.
#[derive(Debug)]
pub(crate) struct Limiter<K> {
    backoff: Backoff,
    /// Consecutive failures of each key since it last succeeded; keys with none are absent.
    failures: HashMap<K, u32>,
    /// The bucket, if any; its clock starts full at the first retry.
    bucket: Option<(TokenBucket, Option<Tokens>)>,
}

impl<K: Eq + Hash + Clone> Limiter<K> {
    /// A limiter with no failures recorded.
    pub(crate) fn new(config: RateLimit) -> Self {
        Self {
            backoff: config.backoff,
            failures: HashMap::new(),
            bucket: config.bucket.map(|b| (b, None)),
        }
    }

    /// Records a failure of `key` at `now` and returns how long its retry waits.
    pub(crate) fn when(&mut self, key: &K, now: Instant) -> Duration {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let per_key = self.backoff.delay(*failures);
        *failures = failures.saturating_add(1);
        let overall = match &mut self.bucket {
            None => Duration::ZERO,
            Some((config, tokens)) => tokens
                .get_or_insert_with(|| Tokens {
                    config: *config,
                    tokens: f64::from(config.burst.get()),
                    at: now,
                })
                .reserve(now),
        };
        per_key.max(overall)
    }

    /// Clears `key`'s failures.
    pub(crate) fn forget(&mut self, key: &K) {
        if !self.failures.is_empty() {
            self.failures.remove(key);
        }
    }

    /// `key`'s consecutive failures.
    pub(crate) fn failures(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn backoff_only() -> RateLimit {
        RateLimit {
            backoff: Backoff::default(),
            bucket: None,
        }
    }

    #[test]
    fn backoff_should_double_from_base_and_stop_at_max() {
        let b = Backoff::default();
        assert_eq!(b.delay(0), ms(5));
        assert_eq!(b.delay(1), ms(10));
        assert_eq!(b.delay(17), Duration::from_millis(5 << 17)); // 655 s
        assert_eq!(b.delay(18), Duration::from_secs(1_000));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1_000), "no overflow");
    }

    #[test]
    fn limiter_should_back_off_per_key_and_forget_on_success() {
        let now = Instant::now();
        let mut l = Limiter::new(backoff_only());
        assert_eq!(l.when(&"a", now), ms(5));
        assert_eq!(l.when(&"a", now), ms(10));
        assert_eq!(l.when(&"a", now), ms(20));
        assert_eq!(l.when(&"b", now), ms(5), "keys back off independently");
        assert_eq!(l.failures(&"a"), 3);
        l.forget(&"a");
        assert_eq!(l.failures(&"a"), 0);
        assert_eq!(l.when(&"a", now), ms(5));
    }

    #[test]
    fn token_bucket_should_let_a_burst_through_then_space_retries() {
        let now = Instant::now();
        let mut l = Limiter::new(RateLimit::default());
        for i in 0..100 {
            assert_eq!(l.when(&i, now), ms(5), "retry {i} is within the burst");
        }
        assert_eq!(l.when(&100, now), ms(100));
        assert_eq!(l.when(&101, now), ms(200));
        // One second later ten tokens have refilled: two repay the reservations above,
        // eight are free.
        let later = now + Duration::from_secs(1);
        for i in 102..110 {
            assert_eq!(l.when(&i, later), ms(5));
        }
        assert_eq!(l.when(&110, later), ms(100));
    }

    #[test]
    fn token_bucket_should_refill_no_more_than_its_burst() {
        let now = Instant::now();
        let bucket = TokenBucket::new(NonZeroU32::MIN, NonZeroU32::MIN.saturating_add(1));
        let mut l = Limiter::new(RateLimit {
            backoff: Backoff::new(Duration::ZERO, Duration::ZERO),
            bucket: Some(bucket),
        });
        let later = now + Duration::from_secs(3_600);
        l.when(&0, now);
        assert_eq!(l.when(&1, later), Duration::ZERO);
        assert_eq!(l.when(&2, later), Duration::ZERO);
        assert_eq!(l.when(&3, later), Duration::from_secs(1));
    }
}
