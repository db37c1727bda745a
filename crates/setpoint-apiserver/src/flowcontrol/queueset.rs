//! One priority level's seats and queues. A `Limited` level executes requests while the seats
//! they take fit in its concurrency limit; beyond that, a `Reject` level refuses at once and a
//! `Queue` level puts the request in one of its queues: the flow (FlowSchema + distinguisher)
//! is dealt a hand of `handSize` queues by shuffle sharding, and the request joins the
//! shortest of them (waiting plus executing seats), or is refused if that one already holds
//! `queueLengthLimit` requests.
//!
//! Fair dispatch (a simplification of kube-apiserver's virtual-time fair queuing): when seats
//! free up, the next request comes from the non-empty queue with the fewest seats executing,
//! ties going round-robin. Each active queue thus gets an equal share of the level's seats
//! however many requests it holds, which is what keeps one flow from starving the others;
//! kube's finer accounting of how long each request ran is not done. A request that needs
//! more seats than are free waits at the head of its queue (nothing overtakes it), so wide
//! LISTs are not starved by narrow requests.
//!
//! Invariant (checked under `debug_assertions`): `in_use` is the sum of the queues'
//! `executing` plus the seats of requests that bypassed the queues; a waiter is in exactly one
//! queue until it is granted seats or gives up.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// How requests that do not fit wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Queuing {
    pub(crate) queues: usize,
    pub(crate) hand_size: usize,
    pub(crate) queue_length_limit: usize,
}

/// What a level is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LevelKind {
    /// Never limited.
    Exempt,
    /// A share of the server's seats; `queuing` `None` for the `Reject` response.
    Limited {
        shares: u32,
        queuing: Option<Queuing>,
    },
}

/// Why a request was refused (kube's `reason` label of `rejected_requests_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its queue was full.
    QueueFull,
    /// The level does not queue and had no seats free.
    ConcurrencyLimit,
    /// It waited in its queue for as long as it may.
    TimeOut,
}

impl Refusal {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::QueueFull => "queue-full",
            Refusal::ConcurrencyLimit => "concurrency-limit",
            Refusal::TimeOut => "time-out",
        }
    }
}

/// One priority level.
#[derive(Debug)]
pub(crate) struct Level {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) kind: LevelKind,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The concurrency limit, in seats.
    limit: usize,
    /// Seats taken by executing requests.
    in_use: usize,
    /// Of those, the seats of wide requests (more than one seat each).
    wide_in_use: usize,
    queues: Vec<Queue>,
    /// Where the round-robin tie-break starts.
    next: usize,
    next_id: u64,
}

#[derive(Debug, Default)]
struct Queue {
    waiters: VecDeque<Waiter>,
    /// Seats of the requests this queue dispatched that still execute.
    executing: usize,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    seats: usize,
    grant: oneshot::Sender<Seats>,
}

/// Seats held by an executing request; given back when dropped.
#[derive(Debug)]
pub(crate) struct Seats {
    level: Option<Arc<Level>>,
    /// The queue that dispatched the request, if it went through one.
    queue: Option<usize>,
    seats: usize,
}

impl Seats {
    /// Seats of an exempt level: nothing to give back.
    pub(crate) fn exempt() -> Seats {
        Seats {
            level: None,
            queue: None,
            seats: 0,
        }
    }
}

impl Drop for Seats {
    fn drop(&mut self) {
        if let Some(level) = self.level.take() {
            let mut state = level.state.lock();
            state.release(self.queue, self.seats);
            state.dispatch(&level);
        }
    }
}

impl State {
    fn release(&mut self, queue: Option<usize>, seats: usize) {
        self.in_use = self.in_use.saturating_sub(seats);
        if seats > 1 {
            self.wide_in_use = self.wide_in_use.saturating_sub(seats);
        }
        if let Some(q) = queue.and_then(|q| self.queues.get_mut(q)) {
            q.executing = q.executing.saturating_sub(seats);
        }
    }

    /// Whether a request of `seats` may start now. Wide requests (more than one seat) may
    /// not hold more than the limit less [`State::reserve`] seats between them: the rest are
    /// kept for narrow requests,
    /// so a get or a write arriving while wide LISTs fill the level starts at once instead of
    /// waiting for one of them to end. Anything may start in an idle level.
    fn fits(&self, seats: usize) -> bool {
        if self.in_use == 0 {
            return true;
        }
        self.in_use + seats <= self.limit
            && (seats == 1 || self.wide_in_use + seats <= self.limit - self.reserve())
    }

    /// Counts `seats` as taken.
    fn take(&mut self, seats: usize) {
        self.in_use += seats;
        if seats > 1 {
            self.wide_in_use += seats;
        }
    }

    /// The seats wide requests leave to narrow ones: the widest request's seats (15 % of the
    /// limit, at most 10), when the limit holds at least twice that; none in a smaller level.
    fn reserve(&self) -> usize {
        let widest = max_seats(self.limit);
        if self.limit >= 2 * widest {
            widest
        } else {
            0
        }
    }

    fn waiting(&self) -> usize {
        self.queues.iter().map(|q| q.waiters.len()).sum()
    }

    /// Grants seats to waiting requests while the next one fits. The next is the head of the
    /// non-empty queue with the fewest seats executing; when that head does not fit, a narrow
    /// head (one seat) of another queue that fits goes instead — the seats kept from wide
    /// requests are for exactly those.
    fn dispatch(&mut self, level: &Arc<Level>) {
        loop {
            let count = self.queues.len();
            let chosen = (0..count)
                .map(|i| (self.next + i) % count)
                .filter(|&q| !self.queues[q].waiters.is_empty())
                .min_by_key(|&q| self.queues[q].executing);
            let Some(mut q) = chosen else { return };
            let Some(mut seats) = self.queues[q].waiters.front().map(|w| w.seats) else {
                return;
            };
            if !self.fits(seats) {
                let narrow = (0..count)
                    .map(|i| (self.next + i) % count)
                    .filter(|&other| {
                        self.queues[other]
                            .waiters
                            .front()
                            .is_some_and(|w| w.seats == 1)
                    })
                    .min_by_key(|&other| self.queues[other].executing);
                match narrow {
                    Some(other) if self.fits(1) => {
                        q = other;
                        seats = 1;
                    }
                    _ => return,
                }
            }
            let Some(waiter) = self.queues[q].waiters.pop_front() else {
                return;
            };
            self.next = (q + 1) % count;
            self.take(seats);
            self.queues[q].executing += seats;
            let granted = Seats {
                level: Some(level.clone()),
                queue: Some(q),
                seats,
            };
            if let Err(mut unwanted) = waiter.grant.send(granted) {
                // The waiter gave up meanwhile: undo here (the lock is held, Drop must not run).
                unwanted.level = None;
                self.release(Some(q), seats);
            }
        }
    }

    #[cfg(debug_assertions)]
    fn check_invariants(&self) {
        let queued: usize = self.queues.iter().map(|q| q.executing).sum();
        debug_assert!(queued <= self.in_use, "queues execute more than in use");
    }
}

/// The most seats one request may take in a level of `limit` seats.
fn max_seats(limit: usize) -> usize {
    limit.saturating_mul(15).div_ceil(100).clamp(1, 10)
}

/// The queue indexes a flow is dealt: `hand_size` distinct ones of `queues`, from its hash.
pub(crate) fn deal(mut hash: u64, queues: usize, hand_size: usize) -> Vec<usize> {
    let hand_size = hand_size.min(queues);
    let mut hand: Vec<usize> = Vec::with_capacity(hand_size);
    for i in 0..hand_size {
        let remaining = (queues - i) as u64;
        let mut card = usize::try_from(hash % remaining).unwrap_or(0);
        hash /= remaining;
        // Skip the cards already dealt: the i-th pick is among the queues not yet in hand.
        let mut sorted = hand.clone();
        sorted.sort_unstable();
        for taken in sorted {
            if card >= taken {
                card += 1;
            }
        }
        hand.push(card);
    }
    hand
}

impl Level {
    pub(crate) fn new(name: String, uid: String, kind: LevelKind) -> Level {
        let queues = match kind {
            LevelKind::Limited {
                queuing: Some(q), ..
            } => q.queues,
            _ => 0,
        };
        Level {
            name,
            uid,
            kind,
            state: Mutex::new(State {
                limit: 1,
                in_use: 0,
                wide_in_use: 0,
                queues: (0..queues).map(|_| Queue::default()).collect(),
                next: 0,
                next_id: 0,
            }),
        }
    }

    /// Sets the concurrency limit and dispatches what now fits.
    pub(crate) fn set_limit(self: &Arc<Self>, limit: usize) {
        let mut state = self.state.lock();
        state.limit = limit;
        state.dispatch(self);
    }

    /// The concurrency limit (0 for an exempt level).
    pub(crate) fn limit(&self) -> usize {
        match self.kind {
            LevelKind::Exempt => 0,
            LevelKind::Limited { .. } => self.state.lock().limit,
        }
    }

    /// The most seats one request may take here: 15 % of the limit, at least 1, at most 10
    /// (kube-apiserver's bound on a request's width).
    pub(crate) fn max_seats(&self) -> usize {
        max_seats(self.limit())
    }

    /// Requests waiting and seats in use now.
    #[cfg(test)]
    pub(crate) fn figures(&self) -> (usize, usize) {
        let state = self.state.lock();
        (state.waiting(), state.in_use)
    }

    /// Takes `seats` for a request of the flow hashed `flow`: at once if they are free and no
    /// one waits, else (a `Queue` level) after waiting in the flow's queue for at most
    /// `wait_limit`. Cancel-safe: dropping the future leaves the queue.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        flow: u64,
        seats: usize,
        wait_limit: Duration,
    ) -> Result<Seats, Refusal> {
        let LevelKind::Limited { queuing, .. } = self.kind else {
            return Ok(Seats::exempt());
        };
        let (id, receiver) = {
            let mut state = self.state.lock();
            let seats = seats.min(state.limit).max(1);
            let Some(queuing) = queuing else {
                if !state.fits(seats) {
                    return Err(Refusal::ConcurrencyLimit);
                }
                state.take(seats);
                return Ok(Seats {
                    level: Some(self.clone()),
                    queue: None,
                    seats,
                });
            };
            let hand = deal(flow, state.queues.len(), queuing.hand_size);
            let Some(q) = hand.into_iter().min_by_key(|&q| {
                let queue = &state.queues[q];
                queue.executing + queue.waiters.iter().map(|w| w.seats).sum::<usize>()
            }) else {
                return Err(Refusal::QueueFull);
            };
            if state.waiting() == 0 && state.fits(seats) {
                state.take(seats);
                state.queues[q].executing += seats;
                return Ok(Seats {
                    level: Some(self.clone()),
                    queue: Some(q),
                    seats,
                });
            }
            if state.queues[q].waiters.len() >= queuing.queue_length_limit {
                return Err(Refusal::QueueFull);
            }
            let id = state.next_id;
            state.next_id += 1;
            let (grant, receiver) = oneshot::channel();
            state.queues[q]
                .waiters
                .push_back(Waiter { id, seats, grant });
            state.dispatch(self);
            #[cfg(debug_assertions)]
            state.check_invariants();
            (id, receiver)
        };
        let mut waiting = Waiting {
            level: self,
            id,
            receiver,
        };
        match tokio::time::timeout(wait_limit, &mut waiting.receiver).await {
            Ok(Ok(seats)) => Ok(seats),
            Ok(Err(_)) => Err(Refusal::TimeOut), // cannot happen: the sender is only dropped after sending
            Err(_elapsed) => {
                let still_queued = {
                    let mut state = self.state.lock();
                    let before = state.waiting();
                    for queue in &mut state.queues {
                        queue.waiters.retain(|w| w.id != id);
                    }
                    state.waiting() < before
                };
                if still_queued {
                    return Err(Refusal::TimeOut);
                }
                // Granted (under the lock) just before the wait ran out.
                waiting.receiver.try_recv().map_err(|_| Refusal::TimeOut)
            }
        }
    }
}

/// A request in a queue; leaves the queue when dropped (given up, timed out, cancelled).
struct Waiting<'a> {
    level: &'a Arc<Level>,
    id: u64,
    receiver: oneshot::Receiver<Seats>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.level.state.lock();
        for queue in &mut state.queues {
            queue.waiters.retain(|w| w.id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(limit: usize, queuing: Option<Queuing>) -> Arc<Level> {
        let level = Arc::new(Level::new(
            "test".to_owned(),
            String::new(),
            LevelKind::Limited { shares: 1, queuing },
        ));
        level.set_limit(limit);
        level
    }

    const QUEUING: Queuing = Queuing {
        queues: 8,
        hand_size: 2,
        queue_length_limit: 2,
    };
    const WAIT: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn wide_requests_should_leave_the_widest_request_s_seats_to_narrow_ones() {
        let queuing = Queuing {
            queues: 64,
            hand_size: 1,
            queue_length_limit: 50,
        };
        let small = level(3, Some(queuing));
        let level = level(10, Some(queuing));
        assert_eq!(level.max_seats(), 2);
        // Four wide requests take 8 seats; the fifth waits although 2 are free.
        let mut wide = Vec::new();
        for _ in 0..4 {
            wide.push(level.acquire(1, 2, WAIT).await.unwrap());
        }
        let fifth = tokio::spawn({
            let level = level.clone();
            async move { level.acquire(1, 2, WAIT).await.map(drop) }
        });
        while level.figures().0 == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(level.figures(), (1, 8));
        // Narrow requests of another flow start at once in the reserve.
        let flow = (2..1000)
            .find(|f| deal(*f, 64, 1) != deal(1, 64, 1))
            .unwrap();
        let narrow = level
            .acquire(flow, 1, Duration::from_millis(1))
            .await
            .unwrap();
        assert_eq!(level.figures(), (1, 9));
        // A narrow request arriving while the blocked wide one waits first in line starts at
        // once too (the wide head does not fit; the narrow one does).
        let other = (flow + 1..2000)
            .find(|f| deal(*f, 64, 1) != deal(1, 64, 1) && deal(*f, 64, 1) != deal(flow, 64, 1))
            .unwrap();
        let narrow2 = level
            .acquire(other, 1, Duration::from_millis(1))
            .await
            .unwrap();
        assert_eq!(level.figures(), (1, 10));
        drop(narrow2);
        // A wide request ending lets the waiting one in.
        drop(wide.pop());
        fifth.await.unwrap().unwrap();
        drop(narrow);
        // In a level too small to keep a reserve, wide requests may fill it.
        let _a = small.acquire(1, 2, WAIT).await.unwrap();
        assert_eq!(small.figures(), (0, 2));
    }

    #[test]
    fn a_hand_should_hold_distinct_queues() {
        for hash in [0_u64, 1, 7, 12345, u64::MAX] {
            let mut hand = deal(hash, 8, 4);
            hand.sort_unstable();
            hand.dedup();
            assert_eq!(hand.len(), 4, "hash {hash}");
            assert!(hand.iter().all(|&q| q < 8));
        }
    }

    #[tokio::test]
    async fn a_reject_level_should_refuse_beyond_its_limit_and_take_again_after_release() {
        let level = level(2, None);
        let a = level.acquire(1, 1, WAIT).await.unwrap();
        let _b = level.acquire(1, 1, WAIT).await.unwrap();
        assert_eq!(
            level.acquire(2, 1, WAIT).await.unwrap_err(),
            Refusal::ConcurrencyLimit
        );
        drop(a);
        assert!(level.acquire(2, 1, WAIT).await.is_ok());
    }

    #[tokio::test]
    async fn a_full_queue_should_refuse_and_a_waiter_should_get_the_released_seat() {
        let level = level(1, Some(QUEUING));
        let held = level.acquire(1, 1, WAIT).await.unwrap();
        let first = tokio::spawn({
            let level = level.clone();
            async move { level.acquire(1, 1, WAIT).await.map(|_| ()) }
        });
        // The flood flow fills its queues (hand of 2 queues × 2 each).
        let mut waiting = Vec::new();
        for _ in 0..3 {
            let level = level.clone();
            waiting.push(tokio::spawn(async move {
                level.acquire(1, 1, WAIT).await.map(drop)
            }));
        }
        setpoint_wait(|| level.figures().0 == 4).await;
        assert_eq!(
            level.acquire(1, 1, WAIT).await.unwrap_err(),
            Refusal::QueueFull
        );
        drop(held);
        first.await.unwrap().unwrap();
        for w in waiting {
            w.await.unwrap().unwrap();
        }
        assert_eq!(level.figures(), (0, 0));
    }

    #[tokio::test]
    async fn the_next_seat_should_go_to_the_queue_with_fewest_executing() {
        let one_queue_each = Queuing {
            hand_size: 1,
            ..QUEUING
        };
        let level = level(2, Some(one_queue_each));
        // Flow 1 holds both seats and has more waiting; flow 2 then waits once.
        let a = level.acquire(1, 1, WAIT).await.unwrap();
        let _b = level.acquire(1, 1, WAIT).await.unwrap();
        let flood = tokio::spawn({
            let level = level.clone();
            async move { level.acquire(1, 1, WAIT).await }
        });
        setpoint_wait(|| level.figures().0 == 1).await;
        let victim = tokio::spawn({
            let level = level.clone();
            async move { level.acquire(2_000_003, 1, WAIT).await }
        });
        setpoint_wait(|| level.figures().0 == 2).await;
        assert_ne!(
            deal(1, 8, 1),
            deal(2_000_003, 8, 1),
            "the flows must not share a queue"
        );
        drop(a);
        let _victim_seats = victim.await.unwrap().unwrap();
        assert!(!flood.is_finished());
        flood.abort();
    }

    #[tokio::test]
    async fn a_waiter_should_time_out_and_leave_its_queue() {
        let level = level(1, Some(QUEUING));
        let _held = level.acquire(1, 1, WAIT).await.unwrap();
        let refused = level.acquire(2, 1, Duration::from_millis(10)).await;
        assert_eq!(refused.unwrap_err(), Refusal::TimeOut);
        assert_eq!(level.figures(), (0, 1));
    }

    async fn setpoint_wait(mut ready: impl FnMut() -> bool) {
        for _ in 0..2000 {
            if ready() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("condition not reached");
    }
}
