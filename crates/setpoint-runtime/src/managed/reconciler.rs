//! [`ManagedReconciler`]: the managed-resource loop's reconcile, the same for every provider —
//! the order of its steps (pause, release, initialise, create guard, connect, observe, then
//! create, late-initialise, update or nothing) and what each step writes. The steps' writes
//! live in [`Run`](super::run::Run); creation and release in their own files.

use std::sync::Arc;
use std::time::Duration;

use crate::managed::annotations::{self, CREATE_INCOMPLETE};
use crate::managed::condition::{
    AVAILABLE, CREATING, RECONCILE_ERROR, RECONCILE_PAUSED, RECONCILE_SUCCESS, UNAVAILABLE,
};
use crate::managed::conditions::{Mark, Verdict};
use crate::managed::events::{
    CANNOT_CONNECT, CANNOT_INITIALIZE, CANNOT_OBSERVE, CANNOT_PUBLISH, CANNOT_UPDATE,
    CANNOT_UPDATE_MANAGED, RECONCILIATION_PAUSED, UPDATED,
};
use crate::managed::run::Run;
use crate::managed::{
    Connector, ExternalClient, Managed, ManagementAction, Readiness, DEFAULT_POLL_INTERVAL,
};
use crate::{Action, Client, EventDetails, EventRecorder, Reconciler};

/// The `Synced` message of a paused object.
const PAUSED_MESSAGE: &str = "reconciliation is paused by the crossplane.io/paused annotation";

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
    pub(super) client: Client,
    pub(super) connector: C,
    pub(super) options: ManagedOptions,
    pub(super) recorder: Option<EventRecorder>,
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
        let mut run = Run::new(self, (*object).clone());
        // 1. Paused: say so, nothing else.
        if annotations::paused(&run.object) {
            run.event(
                EventDetails::normal(RECONCILIATION_PAUSED, "Pause").with_note(PAUSED_MESSAGE),
            );
            run.write(Verdict::default().synced(Mark::no(RECONCILE_PAUSED, PAUSED_MESSAGE)))
                .await?;
            return Ok(Action::await_change());
        }
        // 2. Deleted, or no longer wanting an external object: release it.
        if run.object.meta().deletion_timestamp.is_some() || !run.object.wants_external() {
            return run.release().await;
        }
        // 3.–4. The finalizer and the external name, before anything is created.
        if let Err(error) = run.initialize().await {
            return run
                .fail_with_event(CANNOT_INITIALIZE, "Initialize", Verdict::default(), error)
                .await;
        }
        // 5. A create whose result is unknown: wait for a person. The cache may not have the
        // outcome this loop recorded a moment ago, so the server has the last word.
        if annotations::create_incomplete(&run.object) {
            run.refresh().await?;
        }
        if annotations::create_incomplete(&run.object) {
            run.event(
                EventDetails::warning(CANNOT_INITIALIZE, "Initialize").with_note(CREATE_INCOMPLETE),
            );
            run.write(
                Verdict::default()
                    .ready(Mark::no(CREATING, ""))
                    .synced(Mark::no(RECONCILE_ERROR, CREATE_INCOMPLETE)),
            )
            .await?;
            return Ok(Action::await_change());
        }
        // 6.–7. Connect and observe.
        let external = match self.connector.connect(&run.object).await {
            Ok(external) => external,
            Err(source) => {
                let error = ManagedError::External {
                    what: "connect",
                    source,
                };
                return run
                    .fail_with_event(CANNOT_CONNECT, "Connect", Verdict::default(), error)
                    .await;
            }
        };
        let observation = match external.observe(&run.object).await {
            Ok(observation) => observation,
            Err(source) => {
                let error = ManagedError::External {
                    what: "observe",
                    source,
                };
                return run
                    .fail_with_event(CANNOT_OBSERVE, "Observe", Verdict::default(), error)
                    .await;
            }
        };
        // 8. Missing: create it.
        if !observation.exists {
            return run.create(&external).await;
        }
        // 9. Existing: late-initialise the spec, publish, report readiness.
        if let Err(error) = run.late_initialize(&observation).await {
            return run
                .fail_with_event(
                    CANNOT_UPDATE_MANAGED,
                    "LateInitialize",
                    Verdict::default(),
                    error,
                )
                .await;
        }
        let ready = match &observation.readiness {
            Readiness::Available => Mark::yes(AVAILABLE),
            Readiness::Unavailable(why) => Mark::no(UNAVAILABLE, why.clone()),
        };
        let verdict = Verdict::default()
            .ready(ready)
            .observed(observation.status.clone());
        if let Err(error) = run.publish(&observation.connection_details).await {
            return run
                .fail_with_event(CANNOT_PUBLISH, "Publish", verdict, error)
                .await;
        }
        let poll = self.options.poll_interval;
        // 10. Up to date.
        if observation.up_to_date {
            run.write(verdict.synced(Mark::yes(RECONCILE_SUCCESS)))
                .await?;
            let next = observation
                .next_observation
                .map_or(poll, |next| next.min(poll));
            return Ok(Action::requeue(next));
        }
        // 11. Drifted: update it, when allowed.
        if !run.policies().allows(ManagementAction::Update) {
            run.write(verdict.synced(Mark::yes(RECONCILE_SUCCESS)))
                .await?;
            return Ok(Action::requeue(poll));
        }
        let details = match external.update(&run.object).await {
            Ok(details) => details,
            Err(source) => {
                let error = ManagedError::External {
                    what: "update",
                    source,
                };
                return run
                    .fail_with_event(CANNOT_UPDATE, "Update", verdict, error)
                    .await;
            }
        };
        let note = observation
            .diff
            .clone()
            .unwrap_or_else(|| "the external resource differed from the spec".to_owned());
        run.event(EventDetails::normal(UPDATED, "Update").with_note(note));
        if let Err(error) = run.publish(&details).await {
            return run
                .fail_with_event(CANNOT_PUBLISH, "Publish", verdict, error)
                .await;
        }
        run.write(verdict.synced(Mark::yes(RECONCILE_SUCCESS)))
            .await?;
        Ok(Action::requeue(self.options.after_create))
    }
}
