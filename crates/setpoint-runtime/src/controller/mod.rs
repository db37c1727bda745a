//! Controllers: run a [`Reconciler`] on every object of a kind that needs it, with the
//! work queue's guarantees, per-key backoff, bounded concurrency, panic isolation, timeouts,
//! metrics and graceful shutdown.
//!
//! Use a [`Controller`] when you have a kind `K` whose objects describe a desired state and
//! code that makes the world match it. Build it from a shared
//! [`InformerFactory`](crate::InformerFactory), say what else triggers it (`owns`, `watches`,
//! predicates), and [`run`](Controller::run) it with a reconciler and a context.
//!
//! Promises:
//! - **Level-based, keyed by [`ObjectKey`](crate::ObjectKey)**: events only enqueue keys; the
//!   reconcile gets the object's latest cached state. Events for a key while it waits are
//!   coalesced; an event while it is being reconciled reconciles it once more afterwards.
//! - **One key, one reconcile at a time**, and at most `concurrency` reconciles at once.
//! - **A key whose object is gone is not reconciled** (it is counted and logged at debug).
//!   Clean up on deletion with a finalizer, which keeps the object until you remove it.
//! - **Every outcome finishes the key**: success clears its backoff; `RequeueAfter(d)` clears
//!   it and reconciles again after `d`; an error, a panic or a timeout retries it with
//!   exponential backoff; a terminal error does not retry it (see `workers` for the table).
//! - **Nothing a reconcile does stops the controller**: panics are caught per reconcile and
//!   reconciles over the timeout are cancelled; only a cache-sync timeout ends
//!   [`run`](Controller::run) with an error.
//! - **Graceful shutdown**: when the shutdown future resolves, no new keys are taken and the
//!   reconciles in flight finish before `run` returns.
//!
//! Layout: `action` (the result), `reconciler` (the user's code), `predicate` (trigger
//! filters), `handlers` (informer event → key; owners mapped with [`crate::owner`]),
//! `sources` (the informers a controller reads), `builder` (configuration), `runner`
//! (lifecycle), `workers` (claim → reconcile → outcome), `metrics` (counters and handle),
//! `error` (why `run` fails).

mod action;
mod builder;
mod error;
mod handlers;
mod metrics;
mod predicate;
mod reconciler;
mod runner;
mod sources;
mod workers;

pub use action::Action;
pub use builder::Controller;
pub use error::{ControllerError, UnsyncedInformer};
pub use metrics::{ControllerHandle, ControllerMetrics};
pub use predicate::Predicate;
pub use reconciler::{OnError, Reconciler, TerminalWhen};
pub use workers::Drain;
