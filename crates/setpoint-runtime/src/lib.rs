//! Setpoint's controller SDK: the pieces a controller is built from.
//!
//! - [`Client`]: one client type with two transports — in-process (straight to an API handler
//!   in this process) and remote (HTTPS to any Kubernetes API server, from a kubeconfig).
//! - [`WorkQueue`]: a deduplicating queue of keys with delayed adds, per-key exponential
//!   backoff under an overall token bucket, and client-go's work-queue metrics. Its guarantees
//!   are client-go's — a key added many times before a worker takes it is processed once, a key
//!   re-added while a worker holds it is processed again after that worker is done, and no two
//!   workers ever hold the same key — with an API that makes the usual mistakes unwritable: a
//!   worker receives a [`Claim`] guard instead of a key it must remember to `Done` and `Forget`,
//!   and event handlers receive an [`Enqueuer`] that can only add. A claim dropped without being
//!   finished — a reconcile that panicked or was cancelled — counts as a failure: the key is
//!   retried with backoff.
//!
//! - [`owner`]: controller references — reading them, writing them, and the claim step that
//!   adopts selected orphans and releases owned objects no longer selected.
//! - Custom resources: a `#[derive(CustomResource, JsonSchema)]` type (kube's derive) is used
//!   like any built-in kind — typed [`Client::api`], informers, [`Controller`] and `owns`,
//!   status, finalizers, events — and [`install_crd`] installs its generated CRD and waits
//!   until it is served. Dynamic (untyped) access goes through [`Client::dynamic_api`] and
//!   [`InformerFactory::dynamic_informer`] with an `ApiResource`.
//! - [`managed`]: the managed-resource loop (Crossplane's model) — a provider supplies a
//!   `Connector` and an `ExternalClient` for the outside system, and
//!   [`ManagedReconciler`](managed::ManagedReconciler) observes, creates, updates and deletes
//!   through them, with external names, create guards, finalizers, `Ready`/`Synced` and
//!   connection Secrets.
//!
//! Time comes from `tokio::time`, so tests drive delays, backoff and resync with paused time
//! (`tokio::time::pause` and `advance`).

mod cache;
mod client;
mod clock;
mod controller;
mod crd;
mod events;
mod finalizer;
mod informer;
mod leader;
pub mod managed;
mod metrics;
mod micro_time;
mod object_key;
pub mod owner;
mod queue;
mod status;
mod watcher;

pub use cache::{CacheError, CacheForm, IndexFn, ObjectCache};
pub use client::{Client, ClientError, InProcessService, Transport};
pub use clock::Clock;
pub use controller::{
    Action, Controller, ControllerError, ControllerHandle, ControllerMetrics, Drain, OnError,
    Predicate, Reconciler, TerminalWhen, UnsyncedInformer,
};
pub use crd::{install_crd, CrdError};
pub use events::{
    EventDetails, EventRecorder, EventRecorderConfig, EventRecorderMetrics, EventType, Reporter,
};
pub use finalizer::{
    add_finalizer, finalizer, remove_finalizer, Finalized, FinalizerError, FinalizerEvent,
};
pub use informer::{
    Deleted, EventHandler, HandlerRegistration, InformerFactory, InformerMetrics, InformerOptions,
    SharedInformer,
};
pub use leader::{
    ElectionEnd, LeaderElection, LeaderElectionConfig, LeaderElectionError, LeaderElectionMetrics,
    LeadershipState, LeadershipToken, LeaseLock,
};
pub use metrics::{Encoder, Metrics};
pub use object_key::ObjectKey;
pub use queue::{
    Backoff, Claim, Enqueuer, QueueMetrics, RateLimit, Timing, TokenBucket, WorkQueue,
};
pub use status::{update_status, update_status_with, ConflictRetry, StatusError, StatusUpdate};
pub use watcher::{
    metadata_watcher, watcher, InitialList, WatchBackoff, WatchError, WatcherConfig, WatcherEvent,
};

/// Re-exported so users name the same types the SDK uses.
pub use k8s_openapi;
/// Re-exported so users name the same types the SDK uses (with the `derive` feature, for
/// `#[derive(CustomResource)]`).
pub use kube;
/// Re-exported so custom resources derive their schema (`#[derive(JsonSchema)]`) with the
/// version `kube` expects.
pub use schemars;
