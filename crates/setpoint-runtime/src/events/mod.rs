//! Kubernetes Events (`events.k8s.io/v1`) recorded on behalf of a controller, the way `kubectl
//! describe` shows them: "Warning BackOff (x12 over 3m) …".
//!
//! Use an [`EventRecorder`] per controller (or per process) and call
//! [`publish`](EventRecorder::publish) from reconciles. What it promises:
//! - **Never blocks, never fails the caller**: occurrences go onto a bounded queue served by one
//!   background task; when the queue is full they are dropped and counted.
//! - **Aggregation**: an occurrence identical to one seen less than the aggregation window ago
//!   (same regarding object, related object, type, reason, action and note) does not create an
//!   Event; it raises the existing Event's `series.count` and `series.lastObservedTime`, written
//!   by PATCH at most once per series update interval (and on [`flush`](EventRecorder::flush)).
//! - **Spam filter**: each regarding object has a token bucket (client-go's: burst 25, one more
//!   per 5 minutes); every new Event takes a token, and without one the occurrence is dropped and
//!   counted. A hot loop therefore costs at most the burst in Events plus cheap series updates.
//! - **Bounded memory**: the aggregation cache and the spam filter each keep at most
//!   `cache_capacity` entries, forgetting the least recently seen.
//!
//! Events are named `<object name>.<hex timestamp>` in the regarding object's namespace
//! (`default` for cluster-scoped objects), with `reportingController` / `reportingInstance` from
//! the [`Reporter`] and `eventTime` the moment of `publish`.
//!
//! Submodules: `details` (what callers pass), `correlator` (aggregation and spam decisions, no
//! I/O), `spam` (per-object token buckets), `lru` (the capped map both use), `recorder` (the
//! handle and the writing task).

mod correlator;
mod details;
mod lru;
mod recorder;
mod spam;

pub use details::{EventDetails, EventType, Reporter};
pub use recorder::{EventRecorder, EventRecorderConfig, EventRecorderMetrics};
