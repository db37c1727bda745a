//! Shared informers: one watch per (resource type, namespace, selectors, metadata-only) per
//! process, feeding one indexed cache and any number of event handlers.
//!
//! Use an [`InformerFactory`] to get informers (every controller asking for the same one gets
//! the same [`SharedInformer`]), add handlers and indexes, start the factory, and read the
//! caches through [`ObjectCache`](crate::ObjectCache)s.
//!
//! Promises:
//! - **Handlers are isolated**: each has its own task and unbounded channel, so a slow handler
//!   delays only itself, never the others or the watch.
//! - **Handlers see the cache's history in order**: each notification reflects a change
//!   already applied to the cache; a handler added late first gets `on_add(obj, true)` for
//!   every object cached at that moment, then every later change.
//! - **Deletes are never lost**: an object that vanished across a relist is reported as
//!   [`Deleted::FinalStateUnknown`] with its last cached state.
//! - **Resync is local**: a handler's periodic resync re-delivers the cache as
//!   `on_update(obj, obj)`; it never talks to the API server.
//! - **Failures are loud**: [`SharedInformer::last_error`] holds the latest list/watch error
//!   (RBAC 403, missing resource 404…) until a list or watch succeeds, each failure is logged
//!   at `warn`, and [`InformerMetrics`] counts them.

mod dispatch;
mod factory;
mod handler;
mod metrics;
mod options;
mod shared;
#[cfg(test)]
mod testing;

pub use factory::InformerFactory;
pub use handler::{Deleted, EventHandler, HandlerRegistration};
pub use metrics::InformerMetrics;
pub use options::InformerOptions;
pub use shared::SharedInformer;
