//! The work queue's observable contract, through the public API only: dedup, deferral of
//! re-adds, exclusivity under concurrency, delays, backoff, the token bucket, shutdown and
//! what dropping a claim means.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use setpoint_runtime::{Backoff, RateLimit, TokenBucket, WorkQueue};
use tokio::time::{advance, timeout};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Whether `next` would hand out a key right now, without claiming it for long.
async fn ready_now<K: Clone + Eq + std::hash::Hash + Send + Sync + 'static>(
    q: &WorkQueue<K>,
) -> Option<K> {
    match timeout(Duration::ZERO, q.next()).await {
        Ok(Some(claim)) => {
            let key = claim.key().clone();
            claim.done();
            Some(key)
        }
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn queue_should_process_a_key_added_many_times_once() {
    let q = WorkQueue::new();
    for _ in 0..5 {
        q.add("a");
    }
    q.add("b");
    assert_eq!(q.len(), 2);
    let a = q.next().await.unwrap();
    let b = q.next().await.unwrap();
    assert_eq!((*a.key(), *b.key()), ("a", "b"));
    a.done();
    b.done();
    assert_eq!(ready_now(&q).await, None);
    assert_eq!(q.metrics().adds_total, 2);
}

#[tokio::test(start_paused = true)]
async fn queue_should_defer_key_readded_while_processing_until_done() {
    let q = WorkQueue::new();
    q.add("a");
    let claim = q.next().await.unwrap();
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 0, "not handed out while claimed");
    assert_eq!(q.metrics().depth, 1, "but counted as waiting");
    let second = tokio::spawn({
        let q = q.clone();
        async move { q.next().await.map(|c| *c.key()) }
    });
    tokio::task::yield_now().await;
    assert!(!second.is_finished());
    claim.done();
    assert_eq!(second.await.unwrap(), Some("a"));
    assert_eq!(ready_now(&q).await, None, "processed once more, not twice");
}

/// A small deterministic generator (SplitMix64), so the stress test needs no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queue_should_never_hand_one_key_to_two_workers() {
    const KEYS: usize = 16;
    const WORKERS: u64 = 6;
    const OPS: usize = 4_000;
    let seed = std::env::var("SETPOINT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    println!("seed {seed} (rerun with SETPOINT_SEED={seed})");

    let q = WorkQueue::with_rate_limit(RateLimit {
        backoff: Backoff::new(Duration::ZERO, Duration::ZERO),
        bucket: None,
    });
    let in_use: Arc<Vec<AtomicBool>> =
        Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    let processed = Arc::new(AtomicU64::new(0));
    for k in 0..KEYS {
        q.add(k);
    }
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (q, in_use, processed) = (q.clone(), in_use.clone(), processed.clone());
        let mut rng = SplitMix(seed ^ (w + 1).wrapping_mul(0x1000_0001));
        tasks.push(tokio::spawn(async move {
            for _ in 0..OPS {
                let r = rng.next();
                q.add((r % KEYS as u64) as usize);
                let Some(claim) = q.next().await else { break };
                let k = *claim.key();
                assert!(
                    !in_use[k].swap(true, Ordering::SeqCst),
                    "key {k} handed to two workers (seed {seed})"
                );
                if r & 4 == 0 {
                    tokio::task::yield_now().await;
                }
                q.add((r >> 8) as usize % KEYS);
                in_use[k].store(false, Ordering::SeqCst);
                processed.fetch_add(1, Ordering::Relaxed);
                match (r >> 16) % 3 {
                    0 => claim.done(),
                    1 => claim.retry(),
                    _ => drop(claim),
                }
            }
        }));
    }
    for task in tasks {
        timeout(Duration::from_secs(30), task)
            .await
            .expect("workers finish")
            .expect("no worker panicked");
    }
    assert!(processed.load(Ordering::Relaxed) > 0);
    q.shut_down();
    while let Some(claim) = q.next().await {
        claim.done();
    }
    assert_eq!(q.metrics().unfinished_work, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn add_after_should_hand_the_key_out_once_the_delay_has_passed() {
    let q = WorkQueue::new();
    q.add_after("a", ms(100));
    assert_eq!(q.len(), 0);
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.next().await.map(|c| *c.key()) }
    });
    advance(ms(99)).await;
    assert!(!waiter.is_finished());
    advance(ms(1)).await;
    assert_eq!(waiter.await.unwrap(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn add_after_should_keep_the_earliest_delay_for_a_key_waiting_twice() {
    let q = WorkQueue::new();
    q.add_after("a", ms(100));
    q.add_after("a", ms(10));
    q.add_after("a", ms(50));
    advance(ms(10)).await;
    assert_eq!(ready_now(&q).await, Some("a"));
    advance(ms(200)).await;
    assert_eq!(
        ready_now(&q).await,
        None,
        "the later delays were superseded"
    );
}

#[tokio::test(start_paused = true)]
async fn add_after_should_wake_a_worker_already_waiting_for_a_later_key() {
    let q = WorkQueue::new();
    q.add_after("late", ms(1_000));
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.next().await.map(|c| *c.key()) }
    });
    tokio::task::yield_now().await;
    q.add_after("soon", ms(10));
    advance(ms(10)).await;
    assert_eq!(waiter.await.unwrap(), Some("soon"));
}

/// Time from now until a key is handed out, which then fails again.
async fn time_to_next_failure(q: &WorkQueue<&'static str>) -> Duration {
    let start = tokio::time::Instant::now();
    let claim = q.next().await.expect("the queue is not shut down");
    let waited = start.elapsed();
    claim.retry();
    waited
}

#[tokio::test(start_paused = true)]
async fn retry_should_back_off_exponentially_and_done_should_clear_it() {
    let q = WorkQueue::new();
    q.add("a");
    let first = q.next().await.unwrap();
    assert_eq!(first.failures(), 0);
    first.retry();
    assert_eq!(time_to_next_failure(&q).await, ms(5));
    assert_eq!(time_to_next_failure(&q).await, ms(10));
    assert_eq!(time_to_next_failure(&q).await, ms(20));
    let claim = q.next().await.unwrap();
    assert_eq!(claim.failures(), 4);
    claim.done();
    q.add("a");
    let claim = q.next().await.unwrap();
    assert_eq!(claim.failures(), 0, "done cleared the backoff");
    claim.retry();
    assert_eq!(time_to_next_failure(&q).await, ms(5));
}

#[tokio::test(start_paused = true)]
async fn retry_after_should_use_the_given_delay_and_keep_the_backoff() {
    let q = WorkQueue::new();
    q.add("a");
    q.next().await.unwrap().retry();
    advance(ms(5)).await;
    let claim = q.next().await.unwrap();
    assert_eq!(claim.failures(), 1);
    claim.retry_after(ms(300));
    advance(ms(299)).await;
    assert_eq!(q.len(), 0);
    advance(ms(1)).await;
    let claim = q.next().await.unwrap();
    assert_eq!(claim.failures(), 1);
    claim.done();
}

#[tokio::test(start_paused = true)]
async fn token_bucket_should_limit_a_burst_of_retries() {
    let per_second = NonZeroU32::new(10).unwrap();
    let burst = NonZeroU32::new(3).unwrap();
    let q = WorkQueue::with_rate_limit(RateLimit {
        backoff: Backoff::new(Duration::ZERO, Duration::ZERO),
        bucket: Some(TokenBucket::new(per_second, burst)),
    });
    for k in 0..5 {
        q.add(k);
    }
    for _ in 0..5 {
        q.next().await.unwrap().retry();
    }
    assert_eq!(q.len(), 3, "the burst is retried at once");
    advance(ms(100)).await;
    assert_eq!(q.len(), 4);
    advance(ms(100)).await;
    assert_eq!(q.len(), 5);
}

#[tokio::test(start_paused = true)]
async fn events_should_not_be_rate_limited() {
    let q = WorkQueue::new();
    for k in 0..1_000 {
        q.enqueuer().add(k);
    }
    assert_eq!(q.len(), 1_000);
}

#[tokio::test(start_paused = true)]
async fn shut_down_and_drain_should_wait_for_in_flight_claims() {
    let q = WorkQueue::new();
    q.add("a");
    q.add("b");
    let claim = q.next().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_and_drain().await }
    });
    tokio::task::yield_now().await;
    assert!(q.is_shut_down());
    q.enqueuer().add("c");
    let b = q.next().await.unwrap();
    assert_eq!(*b.key(), "b", "queued keys are still handed out");
    b.done();
    tokio::task::yield_now().await;
    assert!(!drain.is_finished(), "a claim is still in flight");
    q.add("a");
    claim.done();
    drain.await.unwrap();
    assert!(
        q.next().await.is_none(),
        "the re-add during shutdown was discarded"
    );
}

#[tokio::test(start_paused = true)]
async fn next_should_return_none_to_waiting_workers_on_shut_down() {
    let q: WorkQueue<u32> = WorkQueue::new();
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.next().await.is_none() }
    });
    tokio::task::yield_now().await;
    q.shut_down();
    assert!(waiter.await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn dropping_a_claim_should_retry_the_key_with_backoff() {
    let q = WorkQueue::new();
    q.add("a");
    drop(q.next().await.unwrap());
    assert_eq!(q.len(), 0);
    assert_eq!(q.metrics().retries_total, 1);
    advance(ms(5)).await;
    let claim = q.next().await.unwrap();
    assert_eq!(claim.failures(), 1);
    claim.done();
}

#[tokio::test(start_paused = true)]
async fn a_panicking_worker_should_release_and_retry_its_key() {
    let q = WorkQueue::new();
    q.add("a");
    let worker = tokio::spawn({
        let q = q.clone();
        async move {
            let _claim = q.next().await;
            panic!("reconcile failed");
        }
    });
    assert!(worker.await.is_err());
    advance(ms(5)).await;
    assert_eq!(ready_now(&q).await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_next_should_lose_no_key() {
    let q = WorkQueue::new();
    assert!(timeout(ms(10), q.next()).await.is_err());
    q.add("a");
    assert_eq!(ready_now(&q).await, Some("a"));
}
