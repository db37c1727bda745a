//! [`WorkQueue`]: the public, async work queue controllers reconcile from.
//!
//! Guarantees (client-go's, see `queue`): a key added many times before a worker claims it
//! is handed out once; a key re-added while claimed is handed out again after that claim is
//! finished; no two claims on one key exist at once. Delays keep the earliest time; an
//! [`add`](WorkQueue::add) cancels a pending delay for the key (controller-runtime's
//! improvement over client-go, whose timer would fire a second, redundant time).
//!
//! Shutdown: [`shut_down`](WorkQueue::shut_down) stops taking new work — adds, delayed keys
//! and re-adds of claimed keys are discarded — while keys already queued are still handed out
//! until none are left, after which [`next`](WorkQueue::next) returns `None`.

use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::claim::{Claim, Outcome};
use super::delay::Delays;
use super::enqueuer::Enqueuer;
use super::metrics::{Counters, QueueMetrics};
use super::queue::{Added, OnRelease, Queue};
use super::rate_limit::{Limiter, RateLimit};

/// A deduplicating, delaying, rate-limited queue of keys. Cheap to clone: clones share one
/// queue.
///
/// ```no_run
/// # async fn reconcile(_: &str) -> Result<(), ()> { Ok(()) }
/// # async fn example() {
/// use setpoint_runtime::WorkQueue;
///
/// let queue = WorkQueue::<String>::new();
/// let events = queue.enqueuer(); // give this to event handlers
/// events.add("default/web".to_owned());
/// while let Some(claim) = queue.next().await {
///     match reconcile(claim.key()).await {
///         Ok(()) => claim.done(),    // clears the key's backoff
///         Err(()) => claim.retry(),  // requeued after the key's backoff
///     }
/// }
/// # }
/// ```
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// An empty queue with the default rate limit (5 ms doubling to 1,000 s per key, under
    /// 10 retries a second with a burst of 100). Needs no runtime until awaited.
    pub fn new() -> Self {
        Self::with_rate_limit(RateLimit::default())
    }

    /// An empty queue whose retries are delayed by `rate_limit`.
    pub fn with_rate_limit(rate_limit: RateLimit) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: Queue::new(),
                    delays: Delays::new(),
                    limiter: Limiter::new(rate_limit),
                    counters: Counters::default(),
                    lifecycle: Lifecycle::Running,
                }),
                work: Notify::new(),
                idle: Notify::new(),
            }),
        }
    }

    /// A handle that can only add keys, for event handlers.
    pub fn enqueuer(&self) -> Enqueuer<K> {
        Enqueuer::new(Arc::clone(&self.shared))
    }

    /// Queues `key` now, cancelling any pending delay for it. Coalesces with the key if it
    /// is already queued; deferred until the claim is finished if it is claimed; discarded
    /// once shut down.
    pub fn add(&self, key: K) {
        self.shared.add(key);
    }

    /// Queues `key` after `delay`, unless it is already queued (it will be handed out sooner)
    /// or already waiting for an earlier time. Discarded once shut down.
    pub fn add_after(&self, key: K, delay: Duration) {
        self.shared.add_after(key, delay);
    }

    /// Waits for a key and claims it. Returns `None` once the queue is shut down and no key
    /// is left to hand out.
    ///
    /// Cancel-safe: a cancelled call claims nothing and loses no key.
    pub async fn next(&self) -> Option<Claim<K>> {
        let shared = &self.shared;
        loop {
            let mut woken = pin!(shared.work.notified());
            woken.as_mut().enable();
            let deadline = {
                let now = Instant::now();
                let (mut state, promoted) = shared.lock_promoted(now);
                if let Some((key, waited)) = state.queue.pop(now) {
                    state.counters.claimed(waited);
                    let more = state.queue.len() > 0;
                    drop(state);
                    if more && promoted > 0 {
                        // The keys we promoted may be more than this worker can take.
                        shared.work.notify_one();
                    }
                    return Some(Claim::new(Arc::clone(shared), key));
                }
                if state.lifecycle == Lifecycle::ShutDown {
                    return None;
                }
                state.delays.next_deadline()
            };
            match deadline {
                Some(at) => {
                    tokio::select! {
                        () = woken => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => woken.await,
            }
        }
    }

    /// Stops taking new work: see the module docs. Idempotent.
    pub fn shut_down(&self) {
        self.shared.shut_down();
    }

    /// Shuts down, then waits until every queued key has been claimed and every claim
    /// finished. Needs workers still calling [`next`](Self::next) while the backlog drains;
    /// bound it with `tokio::time::timeout` if they may be gone.
    ///
    /// Cancel-safe: cancelling stops the wait; the queue stays shut down.
    pub async fn shut_down_and_drain(&self) {
        self.shut_down();
        loop {
            let mut idle = pin!(self.shared.idle.notified());
            idle.as_mut().enable();
            if self.shared.state.lock().is_drained() {
                return;
            }
            idle.await;
        }
    }

    /// Whether [`shut_down`](Self::shut_down) has been called.
    pub fn is_shut_down(&self) -> bool {
        self.shared.is_shut_down()
    }

    /// Keys ready to be claimed now (excluding delayed keys not yet due and re-adds deferred
    /// behind a claim). For information only: it may change as soon as it is read.
    pub fn len(&self) -> usize {
        let (state, promoted) = self.shared.lock_promoted(Instant::now());
        let len = state.queue.len();
        drop(state);
        if promoted > 0 {
            self.shared.work.notify_one();
        }
        len
    }

    /// Whether no key is ready to be claimed now (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the queue's metrics.
    pub fn metrics(&self) -> QueueMetrics {
        let now = Instant::now();
        let (state, _) = self.shared.lock_promoted(now);
        state.counters.snapshot(
            state.queue.depth(),
            state.delays.len(),
            state.queue.held_for(now),
        )
    }
}

/// Whether the queue takes new work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// Taking adds.
    Running,
    /// Discarding adds; handing out what is queued until nothing is.
    ShutDown,
}

/// Everything behind one lock.
#[derive(Debug)]
pub(crate) struct State<K> {
    /// Keys queued and claimed.
    queue: Queue<K>,
    /// Keys waiting for a time; none of them is in `queue`'s order. Empty once shut down.
    delays: Delays<K>,
    /// Per-key failures and the shared token bucket.
    limiter: Limiter<K>,
    /// Metric counters.
    counters: Counters,
    /// Whether adds are taken.
    lifecycle: Lifecycle,
}

impl<K: Clone + Eq + Hash> State<K> {
    fn is_drained(&self) -> bool {
        self.lifecycle == Lifecycle::ShutDown
            && self.queue.len() == 0
            && self.queue.in_flight() == 0
    }

    /// Queues `key` now; returns whether a worker should be woken.
    fn add(&mut self, key: K, now: Instant) -> bool {
        if self.lifecycle == Lifecycle::ShutDown {
            return false;
        }
        self.delays.cancel(&key);
        match self.queue.add(key, now) {
            Added::Queued => {
                self.counters.adds_total += 1;
                true
            }
            Added::Deferred => {
                self.counters.adds_total += 1;
                false
            }
            Added::Coalesced => false,
        }
    }

    /// Queues `key` after `delay`; returns what to wake.
    fn add_after(&mut self, key: K, delay: Duration, now: Instant) -> Wake {
        if self.lifecycle == Lifecycle::ShutDown {
            return Wake::None;
        }
        self.counters.retries_total += 1;
        if delay.is_zero() {
            return if self.add(key, now) {
                Wake::One
            } else {
                Wake::None
            };
        }
        if self.queue.is_dirty(&key) {
            return Wake::None;
        }
        // A delay too long for the clock is as good as forever: about thirty years.
        let at = now
            .checked_add(delay)
            .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 24 * 3_600));
        if self.delays.insert(key, at) {
            Wake::All
        } else {
            Wake::None
        }
    }

    /// Moves due keys into the queue; returns how many.
    fn promote(&mut self, now: Instant) -> usize {
        let mut promoted = 0;
        while let Some(key) = self.delays.pop_due(now) {
            if self.queue.add(key, now) == Added::Queued {
                promoted += 1;
            }
            self.counters.adds_total += 1;
        }
        promoted
    }
}

/// Which waiting workers an operation must wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// None: nothing new to hand out.
    None,
    /// One: one key became ready.
    One,
    /// All: the earliest deadline moved, so every sleeper must recompute its own.
    All,
}

/// The queue's state shared by [`WorkQueue`], [`Enqueuer`] and [`Claim`] handles.
#[derive(Debug)]
pub(crate) struct Shared<K> {
    /// All mutable state. Never held across an await.
    state: Mutex<State<K>>,
    /// Wakes workers waiting in `next`: one per key made ready, all on shutdown or when the
    /// earliest deadline moves.
    work: Notify,
    /// Wakes `shut_down_and_drain` waiters whenever the queue may have become drained.
    idle: Notify,
}

impl<K: Clone + Eq + Hash> Shared<K> {
    fn lock_promoted(&self, now: Instant) -> (MutexGuard<'_, State<K>>, usize) {
        let mut state = self.state.lock();
        let promoted = state.promote(now);
        (state, promoted)
    }

    fn wake(&self, wake: Wake) {
        match wake {
            Wake::None => {}
            Wake::One => self.work.notify_one(),
            Wake::All => self.work.notify_waiters(),
        }
    }

    pub(crate) fn add(&self, key: K) {
        let wake = self.state.lock().add(key, Instant::now());
        if wake {
            self.work.notify_one();
        }
    }

    pub(crate) fn add_after(&self, key: K, delay: Duration) {
        let wake = self.state.lock().add_after(key, delay, Instant::now());
        self.wake(wake);
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.state.lock().lifecycle == Lifecycle::ShutDown
    }

    fn shut_down(&self) {
        {
            let mut state = self.state.lock();
            state.lifecycle = Lifecycle::ShutDown;
            state.delays.clear();
        }
        self.work.notify_waiters();
        self.idle.notify_waiters();
    }

    /// `key`'s consecutive failures.
    pub(crate) fn failures(&self, key: &K) -> u32 {
        self.state.lock().limiter.failures(key)
    }

    /// Finishes a claim on `key`.
    pub(crate) fn finish(&self, key: &K, outcome: Outcome) {
        let now = Instant::now();
        let (wake, drained) = {
            let mut state = self.state.lock();
            let on_release = match state.lifecycle {
                Lifecycle::Running => OnRelease::Requeue,
                Lifecycle::ShutDown => OnRelease::Discard,
            };
            let (held, requeued) = state.queue.release(key, now, on_release);
            if let Some(held) = held {
                state.counters.released(held);
            }
            let delay = match outcome {
                Outcome::Done => {
                    state.limiter.forget(key);
                    None
                }
                Outcome::Retry => Some(state.limiter.when(key, now)),
                Outcome::RetryAfter(delay) => Some(delay),
            };
            let wake = match delay {
                Some(delay) => state.add_after(key.clone(), delay, now),
                None => Wake::None,
            };
            let wake = if requeued {
                Wake::One.max_with(wake)
            } else {
                wake
            };
            (wake, state.is_drained())
        };
        self.wake(wake);
        if drained {
            self.idle.notify_waiters();
        }
    }
}

impl Wake {
    fn max_with(self, other: Self) -> Self {
        match (self, other) {
            (Wake::All, _) | (_, Wake::All) => Wake::All,
            (Wake::One, _) | (_, Wake::One) => Wake::One,
            (Wake::None, Wake::None) => Wake::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn add_should_cancel_a_pending_delay_for_the_key() {
        let q = WorkQueue::new();
        q.add_after("a", ms(100));
        q.add("a");
        q.next().await.unwrap().done();
        tokio::time::advance(ms(200)).await;
        assert_eq!(q.len(), 0, "the cancelled delay does not fire a second run");
        assert_eq!(q.metrics().delayed, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_should_not_delay_a_key_already_queued() {
        let q = WorkQueue::new();
        q.add("a");
        q.add_after("a", ms(100));
        assert_eq!(q.metrics().delayed, 0);
        q.next().await.unwrap().done();
        tokio::time::advance(ms(200)).await;
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_should_accept_a_delay_too_long_for_the_clock() {
        let q = WorkQueue::new();
        q.add_after("a", Duration::MAX);
        assert_eq!(q.metrics().delayed, 1);
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_should_track_adds_retries_and_durations() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("a");
        tokio::time::advance(ms(10)).await;
        let claim = q.next().await.unwrap();
        tokio::time::advance(ms(30)).await;
        let m = q.metrics();
        assert_eq!((m.adds_total, m.depth), (1, 0));
        assert_eq!(m.queue_duration.sum, ms(10));
        assert_eq!(m.unfinished_work, ms(30));
        assert_eq!(m.longest_running_processor, ms(30));
        claim.retry();
        let m = q.metrics();
        assert_eq!(m.retries_total, 1);
        assert_eq!(m.work_duration.sum, ms(30));
        assert_eq!(m.work_duration.count, 1);
        assert_eq!(m.delayed, 1);
        assert_eq!(m.unfinished_work, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_should_discard_adds_and_delays_but_hand_out_the_backlog() {
        let q = WorkQueue::new();
        q.add("a");
        q.add_after("b", ms(10));
        q.shut_down();
        q.add("c");
        assert!(q.is_shut_down());
        assert_eq!(q.next().await.map(|c| *c.key()), Some("a"));
        tokio::time::advance(ms(20)).await;
        assert!(q.next().await.is_none());
    }
}
