//! The revisioned (MVCC) key-value store with watch that holds every Setpoint object — the role
//! etcd plays for Kubernetes.
//!
//! - [`Store`] is the interface the API server programs against. It promises a single global
//!   [`Revision`] counter that orders every change, per-key create/mod revisions, writes
//!   conditional on a key's mod revision, consistent lists at a revision, and watches that deliver
//!   every change after a revision exactly once and in order (or fail with
//!   [`StoreError::Compacted`]).
//! - [`EmbeddedStore`] is the default backend: an in-memory MVCC index made durable by a
//!   checksummed write-ahead log with group commit and snapshots. See `docs/design/storage.md`.
//! - With the `etcd` feature, [`EtcdStore`] runs on an etcd v3 cluster (and [`LocalEtcd`]
//!   starts a throwaway etcd member for tests and benchmarks).
//! - [`Pages`] reads everything under a prefix page by page from one snapshot.
//! - [`ModelStore`] is the reference model: obviously correct, slow, used to check the others.
//! - With the `conformance` feature, [`conformance`] holds the suite every backend must pass.

mod embedded;
mod error;
#[cfg(feature = "etcd")]
mod etcd;
mod model;
mod pages;
mod store;
mod types;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use embedded::{EmbeddedConfig, EmbeddedStore};
pub use error::{Result, StoreError};
#[cfg(feature = "etcd")]
pub use etcd::{
    EtcdConfig, EtcdStore, EtcdTls, LocalEtcd, LocalEtcdCluster, LocalEtcdError, LocalEtcdTls,
    COMPACT_REV_KEY,
};
pub use model::ModelStore;
pub use pages::Pages;
pub use setpoint_core::Revision;
pub use store::{prefix_end, Store, WatchStream};
pub use types::{Event, EventKind, KeyValue, ListRequest, ListResult, WatchBatch};
