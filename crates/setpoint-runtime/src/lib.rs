//! Setpoint's controller SDK: the pieces a controller is built from.
//!
//! The first piece is the [`WorkQueue`]: a deduplicating queue of keys with delayed adds,
//! per-key exponential backoff under an overall token bucket, and client-go's work-queue
//! metrics. Its guarantees are client-go's — a key added many times before a worker takes it
//! is processed once, a key re-added while a worker holds it is processed again after that
//! worker is done, and no two workers ever hold the same key — with an API that makes the
//! usual mistakes unwritable: a worker receives a [`Claim`] guard instead of a key it must
//! remember to `Done` and `Forget`, and event handlers receive an [`Enqueuer`] that can only
//! add. A claim dropped without being finished — a reconcile that panicked or was cancelled —
//! counts as a failure: the key is retried with backoff.
//!
//! Time comes from `tokio::time`, and the queue runs no task of its own, so tests drive delays
//! and backoff with paused time (`tokio::time::pause` and `advance`).

mod queue;

pub use queue::{
    Backoff, Claim, Enqueuer, QueueMetrics, RateLimit, Timing, TokenBucket, WorkQueue,
};
