//! Step 2 of a reconcile: releasing the external object of a managed object that is being
//! deleted or no longer wants one — deleting it (with `deletionPolicy: Delete` and `Delete`
//! among the management policies) until an observation says it is gone, or leaving it
//! (`Orphan`), then removing the finalizer. A connection Secret is left to the garbage
//! collector (it is owned by the object). An object that is not being deleted also loses its
//! `Ready` and `Synced` conditions, and takes the observation's status (a load balancer's
//! address cleared, say).

use serde_json::json;

use crate::managed::condition::{DELETING, RECONCILE_SUCCESS};
use crate::managed::conditions::{Mark, Verdict};
use crate::managed::events::{CANNOT_CONNECT, CANNOT_DELETE, CANNOT_OBSERVE, DELETED};
use crate::managed::run::Run;
use crate::managed::{
    Connector, DeletionPolicy, ExternalClient, Managed, ManagedError, ManagementAction,
};
use crate::{Action, EventDetails};

/// How many times removing the finalizer is tried when the object changed since it was read.
const FINALIZER_ATTEMPTS: u32 = 3;

/// Whether `object` still carries the loop's finalizer.
fn holds_finalizer<M: Managed>(object: &M) -> bool {
    object
        .meta()
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == M::finalizer())
}

/// The HTTP status of an API error.
fn api_code(error: &ManagedError) -> Option<u16> {
    match error {
        ManagedError::Api {
            source: kube::Error::Api(status),
            ..
        } => Some(status.code),
        _ => None,
    }
}

impl<M: Managed, C: Connector<M>> Run<'_, M, C> {
    /// Releases the external object, then the finalizer.
    pub(super) async fn release(&mut self) -> Result<Action, ManagedError> {
        let deleting = self.object.meta().deletion_timestamp.is_some();
        if !holds_finalizer(&self.object) {
            return Ok(Action::await_change());
        }
        let orphan = self
            .object
            .resource_spec()
            .is_some_and(|s| s.deletion_policy() == DeletionPolicy::Orphan);
        if orphan || !self.policies().allows(ManagementAction::Delete) {
            return self.let_go(deleting, Verdict::default()).await;
        }
        let external = match self.reconciler.connector.connect(&self.object).await {
            Ok(external) => external,
            Err(source) => {
                let error = ManagedError::External {
                    what: "connect",
                    source,
                };
                return self
                    .fail_with_event(CANNOT_CONNECT, "Connect", Verdict::default(), error)
                    .await;
            }
        };
        let observation = match external.observe(&self.object).await {
            Ok(observation) => observation,
            Err(source) => {
                let error = ManagedError::External {
                    what: "observe",
                    source,
                };
                return self
                    .fail_with_event(CANNOT_OBSERVE, "Observe", Verdict::default(), error)
                    .await;
            }
        };
        if !observation.exists {
            let verdict = Verdict::default().observed(observation.status);
            return self.let_go(deleting, verdict).await;
        }
        let verdict = Verdict::default().ready(Mark::no(DELETING, ""));
        if let Err(source) = external.delete(&self.object).await {
            let error = ManagedError::External {
                what: "delete",
                source,
            };
            return self
                .fail_with_event(CANNOT_DELETE, "Delete", verdict, error)
                .await;
        }
        self.event(
            EventDetails::normal(DELETED, "Delete")
                .with_note("Successfully requested deletion of external resource"),
        );
        self.write(verdict.synced(Mark::yes(RECONCILE_SUCCESS)))
            .await?;
        Ok(Action::requeue(self.reconciler.options.after_create))
    }

    /// Removes the finalizer (guarded by the object's version); an object that is not being
    /// deleted first loses `Ready` and `Synced` and takes `verdict`'s observed status.
    async fn let_go(&mut self, deleting: bool, verdict: Verdict) -> Result<Action, ManagedError> {
        if !deleting {
            self.write(Verdict {
                forget: true,
                ..verdict
            })
            .await?;
        }
        // Guarded by the version read; a conflict (the cache behind the server, or another
        // writer) re-reads the object and tries again, rather than waiting out the key's
        // back-off, which earlier failures of the external system may have made long.
        let mut attempt = 1;
        loop {
            let finalizers: Vec<String> = self
                .object
                .meta()
                .finalizers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f != M::finalizer())
                .collect();
            let error = match self
                .patch(
                    "removing the finalizer",
                    json!({"metadata": {"finalizers": finalizers}}),
                    true,
                )
                .await
            {
                Ok(()) => return Ok(Action::await_change()),
                Err(error) => error,
            };
            match api_code(&error) {
                // Removing the last finalizer of a deleted object deletes it: the write may
                // find it gone.
                Some(404) => return Ok(Action::await_change()),
                Some(409) if attempt < FINALIZER_ATTEMPTS => {
                    attempt += 1;
                    match self.refresh().await {
                        Ok(()) => {}
                        Err(error) if api_code(&error) == Some(404) => {
                            return Ok(Action::await_change())
                        }
                        Err(error) => return Err(error),
                    }
                    let still = self.object.meta().deletion_timestamp.is_some() == deleting
                        && (deleting || !self.object.wants_external());
                    if !holds_finalizer(&self.object) {
                        return Ok(Action::await_change());
                    }
                    if !still {
                        // Changed under us in a way that matters: decide afresh.
                        return Ok(Action::requeue(std::time::Duration::ZERO));
                    }
                }
                _ => return Err(error),
            }
        }
    }
}
