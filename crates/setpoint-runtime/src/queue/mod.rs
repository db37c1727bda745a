//! The work queue: keys in, claims out.
//!
//! Layered like client-go's `util/workqueue`, one concept per file: [`queue`](self::queue)
//! holds the dedup/processing core, `delay` the timer heap behind
//! [`WorkQueue::add_after`], `rate_limit` the per-key backoff and overall token bucket behind
//! [`Claim::retry`], `metrics` the counters behind [`WorkQueue::metrics`]; `work_queue`, `claim`
//! and `enqueuer` are the public, async face over all of them.

mod claim;
mod delay;
mod enqueuer;
mod metrics;
#[allow(
    clippy::module_inception,
    reason = "mirrors client-go's layout: queue/queue.rs is the core queue the rest wrap"
)]
mod queue;
mod rate_limit;
mod work_queue;

pub use claim::Claim;
pub use enqueuer::Enqueuer;
pub use metrics::{QueueMetrics, Timing};
pub use rate_limit::{Backoff, RateLimit, TokenBucket};
pub use work_queue::WorkQueue;
