//! [`ManagedReconciler`]: the managed-resource loop's reconcile, the same for every provider.
//! CONTRACT SKELETON (providers-base): the helper `managed` writes the body; the public names
//! and signatures here stay.

use std::sync::Arc;
use std::time::Duration;

use crate::managed::{Connector, Managed, DEFAULT_POLL_INTERVAL};
use crate::{Action, Client, EventRecorder, Reconciler};

/// How a [`ManagedReconciler`] runs.
#[derive(Clone, Debug)]
pub struct ManagedOptions {
    /// How often an external object is observed when nothing changes (default 1 minute).
    pub poll_interval: Duration,
    /// How long after a create the object is observed again (default 1 s: a create is
    /// confirmed by the next observation).
    pub after_create: Duration,
    /// The field manager of the loop's writes, and the name in its events.
    pub name: String,
}

impl ManagedOptions {
    /// The defaults, for the loop `name`.
    pub fn new(name: impl Into<String>) -> ManagedOptions {
        ManagedOptions {
            poll_interval: DEFAULT_POLL_INTERVAL,
            after_create: Duration::from_secs(1),
            name: name.into(),
        }
    }
}

/// Why one reconcile of a managed object failed; the message is also the `Synced` condition's.
#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    /// Writing the managed object, its status or its connection Secret failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being written.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// The external system answered with an error.
    #[error("{what}: {source}")]
    External {
        /// What was being done (`connect`, `observe`, `create`, `update`, `delete`).
        what: &'static str,
        /// Why it failed.
        #[source]
        source: crate::managed::ExternalError,
    },
}

/// Reconciles objects of `M` with their external objects through the connector `C`. Run it as
/// the reconciler of a [`Controller<M>`](crate::Controller) (whose context it ignores), with
/// whatever extra `watches` the provider needs. Works for namespaced and cluster-scoped kinds
/// (`kube::Api::namespaced_with` / `all_with` by the object's namespace):
///
/// ```ignore
/// Controller::<Database>::new(&factory)
///     .named("postgresql-database")
///     .run(ManagedReconciler::new(client, connector, options), Arc::new(()), shutdown)
///     .await
/// ```
pub struct ManagedReconciler<M, C> {
    client: Client,
    connector: C,
    options: ManagedOptions,
    recorder: Option<EventRecorder>,
    _kind: std::marker::PhantomData<fn() -> M>,
}

impl<M: Managed, C: Connector<M>> ManagedReconciler<M, C> {
    /// A reconciler writing with `client`.
    pub fn new(client: Client, connector: C, options: ManagedOptions) -> ManagedReconciler<M, C> {
        ManagedReconciler {
            client,
            connector,
            options,
            recorder: None,
            _kind: std::marker::PhantomData,
        }
    }

    /// The same, recording events (`CreatedExternalResource`, `CannotObserveExternalResource`,
    /// …) with `recorder`.
    pub fn with_events(mut self, recorder: EventRecorder) -> Self {
        self.recorder = Some(recorder);
        self
    }
}

impl<M, C, X> Reconciler<M, X> for ManagedReconciler<M, C>
where
    M: Managed,
    C: Connector<M>,
    X: Send + Sync + 'static,
{
    type Error = ManagedError;

    async fn reconcile(&self, object: Arc<M>, _context: Arc<X>) -> Result<Action, ManagedError> {
        let _ = (
            &self.client,
            &self.connector,
            &self.options,
            &self.recorder,
            object,
        );
        Ok(Action::await_change())
    }
}
