//! The indexed cache behind every informer: objects by [`ObjectKey`](crate::ObjectKey), by
//! namespace, by label selector and by user-defined indexes, read through a cloneable
//! [`ObjectCache`] handle.
//!
//! Use it through an informer ([`SharedInformer::store`](crate::SharedInformer::store)): the
//! informer is its only writer. Promises:
//! - each object is held once: decoded, as an `Arc` that reads hand out clones of, or — in the
//!   compact [`CacheForm`], for big caches — as compressed JSON that reads decode, keeping the
//!   few most recently used objects decoded;
//! - a complete list (initial or relist) replaces the content atomically — a reader sees the
//!   old set or the new one, never a mix;
//! - every index always files exactly the cached objects, including an index added after
//!   objects were cached.

mod form;
mod index;
mod object_cache;
mod recent;
mod slot;

pub use form::CacheForm;
pub use index::IndexFn;
pub use object_cache::{CacheError, ObjectCache};
