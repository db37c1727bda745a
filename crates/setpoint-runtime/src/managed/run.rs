//! [`Run`]: one reconcile of one managed object in progress — the object as last read or
//! written, and the writes every step shares: status verdicts, failures (`Synced=False` with
//! the error chain, then the error for the work queue's back-off), annotations, connection
//! details and events.

use serde_json::{json, Map, Value};

use crate::managed::condition::RECONCILE_ERROR;
use crate::managed::conditions::{Mark, Verdict};
use crate::managed::object::{is_conflict, ObjectApi};
use crate::managed::reconciler::ManagedReconciler;
use crate::managed::{connection, ConnectionDetails, Managed, ManagedError, ManagementPolicies};
use crate::{Action, EventDetails};

/// How many times a create's outcome annotation is written before giving up (its loss leaves
/// the object blocked behind the create guard).
const OUTCOME_ATTEMPTS: u32 = 3;

/// One reconcile in progress.
pub(super) struct Run<'a, M, C> {
    /// The reconciler (client, connector, options, recorder).
    pub(super) reconciler: &'a ManagedReconciler<M, C>,
    /// Writes to the object.
    api: ObjectApi,
    /// The object as last read or written.
    pub(super) object: M,
}

impl<'a, M: Managed, C> Run<'a, M, C> {
    /// A reconcile of `object`.
    pub(super) fn new(reconciler: &'a ManagedReconciler<M, C>, object: M) -> Run<'a, M, C> {
        Run {
            api: ObjectApi::new(&reconciler.client, &object, &reconciler.options.name),
            reconciler,
            object,
        }
    }

    /// The object's management policies.
    pub(super) fn policies(&self) -> ManagementPolicies {
        self.object
            .resource_spec()
            .map(|s| s.management_policies())
            .unwrap_or_default()
    }

    /// Writes `verdict` into the object's status (nothing when it changes nothing).
    pub(super) async fn write(&mut self, verdict: Verdict) -> Result<(), ManagedError> {
        if let Some(patch) = verdict.status_patch(&self.object) {
            self.object = self.api.patch_status(patch).await?;
        }
        Ok(())
    }

    /// Records `error` (`Synced=False/ReconcileError`, with `verdict`'s other marks) and returns
    /// it, for the work queue to retry with back-off. A conflict (the object changed under a
    /// guarded write) is only returned: the retry reads the fresh object, and there is nothing
    /// to tell anyone (Crossplane's).
    pub(super) async fn fail(
        &mut self,
        verdict: Verdict,
        error: ManagedError,
    ) -> Result<Action, ManagedError> {
        if is_conflict(&error) {
            return Err(error);
        }
        let verdict = verdict.synced(Mark::no(RECONCILE_ERROR, error_chain(&error)));
        if let Err(status) = self.write(verdict).await {
            tracing::debug!(error = %status, "cannot record a reconcile error in the status");
        }
        Err(error)
    }

    /// [`fail`](Self::fail) with a Warning event `reason` (action `action`) first.
    pub(super) async fn fail_with_event(
        &mut self,
        reason: &str,
        action: &str,
        verdict: Verdict,
        error: ManagedError,
    ) -> Result<Action, ManagedError> {
        if !is_conflict(&error) {
            self.event(EventDetails::warning(reason, action).with_note(error_chain(&error)));
        }
        self.fail(verdict, error).await
    }

    /// Reads the object afresh from the server.
    pub(super) async fn refresh(&mut self) -> Result<(), ManagedError> {
        self.object = self.api.get().await?;
        Ok(())
    }

    /// Publishes an event about the object, if events are recorded.
    pub(super) fn event(&self, details: EventDetails) {
        if let Some(recorder) = &self.reconciler.recorder {
            recorder.publish_for(&self.object, details);
        }
    }

    /// Merge-patches the object (a patch of metadata or spec); with `guarded`, only if it has
    /// not changed since read. The object written becomes the current one.
    pub(super) async fn patch(
        &mut self,
        what: &str,
        patch: Value,
        guarded: bool,
    ) -> Result<(), ManagedError> {
        let rv = self.object.meta().resource_version.clone();
        let guard = if guarded { rv.as_deref() } else { None };
        self.object = self.api.patch(what, patch, guard).await?;
        Ok(())
    }

    /// Sets `annotations` on the object (see [`patch`](Self::patch)).
    pub(super) async fn annotate(
        &mut self,
        what: &str,
        annotations: &[(&str, String)],
        guarded: bool,
    ) -> Result<(), ManagedError> {
        let values: Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        self.patch(what, json!({"metadata": {"annotations": values}}), guarded)
            .await
    }

    /// Records a create's outcome in `annotations`, unguarded (the keys are the loop's alone)
    /// and retried: an outcome lost leaves the object blocked behind the create guard.
    pub(super) async fn record_outcome(
        &mut self,
        annotations: &[(&str, String)],
    ) -> Result<(), ManagedError> {
        let mut attempt = 1;
        loop {
            match self
                .annotate("recording the create's outcome", annotations, false)
                .await
            {
                Err(error) if attempt < OUTCOME_ATTEMPTS => {
                    tracing::debug!(%error, attempt, "cannot record a create's outcome");
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Merges `details` into the object's connection Secret, if it names one.
    pub(super) async fn publish(&self, details: &ConnectionDetails) -> Result<(), ManagedError> {
        connection::publish(
            &self.reconciler.client,
            &self.object,
            details,
            &self.reconciler.options.name,
        )
        .await
    }
}

/// `error` and its causes, each once (a cause a message already includes is not repeated).
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
