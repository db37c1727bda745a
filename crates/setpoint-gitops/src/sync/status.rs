//! A Sync's status after a reconcile: the conditions Flux's Kustomization reports (`Ready`,
//! `Reconciling`, `Stalled`, `Healthy`), the revisions, the inventory and the handled
//! reconcile request, written through the status subresource only when something changed (so
//! an unchanged reconcile writes nothing, and triggers no watch event).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use setpoint_runtime::{update_status, StatusError};

use crate::kinds::{condition, Inventory, Sync, SyncStatus};

/// Condition reasons (Flux's where the meaning is the same).
pub(crate) mod reason {
    /// The revision is applied (and healthy when asked).
    pub(crate) const SUCCEEDED: &str = "ReconciliationSucceeded";
    /// The source has no usable artifact.
    pub(crate) const ARTIFACT_FAILED: &str = "ArtifactFailed";
    /// The path did not build.
    pub(crate) const BUILD_FAILED: &str = "BuildFailed";
    /// The API refused an object.
    pub(crate) const RECONCILIATION_FAILED: &str = "ReconciliationFailed";
    /// Objects were not healthy in time.
    pub(crate) const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    /// A dependency is not ready at its source's revision.
    pub(crate) const DEPENDENCY_NOT_READY: &str = "DependencyNotReady";
    /// The prune would have deleted everything.
    pub(crate) const PRUNE_REFUSED: &str = "PruneRefused";
    /// A prune deletion failed.
    pub(crate) const PRUNE_FAILED: &str = "PruneFailed";
    /// `serviceAccountName` cannot be honoured by this client.
    pub(crate) const IMPERSONATION_FAILED: &str = "ImpersonationFailed";
    /// Work in progress on a new revision.
    pub(crate) const PROGRESSING: &str = "Progressing";
}

/// One condition to set: (status, reason, message).
pub(crate) type Set = (bool, &'static str, String);

/// What one reconcile concluded.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// `Ready`.
    pub(crate) ready: Option<Set>,
    /// `Stalled=True` with this reason and message; absent: no `Stalled` condition.
    pub(crate) stalled: Option<(&'static str, String)>,
    /// `Reconciling=True` with this reason and message; absent: no `Reconciling` condition.
    pub(crate) reconciling: Option<(&'static str, String)>,
    /// `Healthy` (when health is checked; absent otherwise).
    pub(crate) healthy: Option<Set>,
    /// New `lastAppliedRevision`.
    pub(crate) applied_revision: Option<String>,
    /// New `lastAttemptedRevision`.
    pub(crate) attempted_revision: Option<String>,
    /// New inventory.
    pub(crate) inventory: Option<Inventory>,
    /// The reconcile request handled.
    pub(crate) handled: Option<String>,
}

/// Sets a condition, keeping its transition time when its status did not change.
fn set_condition(conditions: &mut Vec<Condition>, kind: &str, set: &Set, generation: Option<i64>) {
    let status = if set.0 { "True" } else { "False" };
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == kind) {
        if existing.status != status {
            existing.last_transition_time = Time(k8s_openapi::jiff::Timestamp::now());
        }
        existing.status = status.to_owned();
        existing.reason = set.1.to_owned();
        existing.message = set.2.clone();
        existing.observed_generation = generation;
    } else {
        conditions.push(Condition {
            type_: kind.to_owned(),
            status: status.to_owned(),
            reason: set.1.to_owned(),
            message: set.2.clone(),
            observed_generation: generation,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        });
    }
}

impl Outcome {
    /// Applies this outcome to a status.
    pub(crate) fn apply_to(&self, status: &mut SyncStatus, generation: Option<i64>) {
        status.observed_generation = generation;
        let conditions = &mut status.conditions;
        if let Some(ready) = &self.ready {
            set_condition(conditions, condition::READY, ready, generation);
        }
        match &self.reconciling {
            Some((reason, message)) => set_condition(
                conditions,
                condition::RECONCILING,
                &(true, reason, message.clone()),
                generation,
            ),
            None => conditions.retain(|c| c.type_ != condition::RECONCILING),
        }
        match &self.stalled {
            Some((reason, message)) => set_condition(
                conditions,
                condition::STALLED,
                &(true, reason, message.clone()),
                generation,
            ),
            None => conditions.retain(|c| c.type_ != condition::STALLED),
        }
        match &self.healthy {
            Some(healthy) => set_condition(conditions, condition::HEALTHY, healthy, generation),
            None if self.ready.as_ref().is_some_and(|r| r.0) => {
                conditions.retain(|c| c.type_ != condition::HEALTHY);
            }
            None => {}
        }
        if let Some(revision) = &self.applied_revision {
            status.last_applied_revision = Some(revision.clone());
        }
        if let Some(revision) = &self.attempted_revision {
            status.last_attempted_revision = Some(revision.clone());
        }
        if let Some(inventory) = &self.inventory {
            status.inventory = Some(inventory.clone());
        }
        if let Some(handled) = &self.handled {
            status.last_handled_reconcile_at = Some(handled.clone());
        }
    }
}

/// Writes `outcome` into the Sync's status (nothing when it changes nothing).
pub(crate) async fn write(
    api: &kube::Api<Sync>,
    name: &str,
    outcome: &Outcome,
) -> Result<(), StatusError> {
    update_status(api, name, |sync: &mut Sync| {
        let generation = sync.metadata.generation;
        let status = sync.status.get_or_insert_with(SyncStatus::default);
        outcome.apply_to(status, generation);
    })
    .await
    .map(|_| ())
}

/// The current `Ready` condition's message, if any.
pub(crate) fn ready_message(sync: &Sync) -> Option<&str> {
    sync.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == condition::READY)
        .map(|c| c.message.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_outcome_should_leave_the_status_equal() {
        let outcome = Outcome {
            ready: Some((
                true,
                reason::SUCCEEDED,
                "Applied revision: main@sha1:1".to_owned(),
            )),
            applied_revision: Some("main@sha1:1".to_owned()),
            attempted_revision: Some("main@sha1:1".to_owned()),
            ..Outcome::default()
        };
        let mut status = SyncStatus::default();
        outcome.apply_to(&mut status, Some(1));
        let before = status.clone();
        outcome.apply_to(&mut status, Some(1));
        assert_eq!(status, before);
        let failed = Outcome {
            ready: Some((false, reason::BUILD_FAILED, "bad".to_owned())),
            stalled: Some((reason::BUILD_FAILED, "bad".to_owned())),
            ..Outcome::default()
        };
        failed.apply_to(&mut status, Some(2));
        assert_eq!(status.last_applied_revision.as_deref(), Some("main@sha1:1"));
        assert!(status
            .conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True"));
        outcome.apply_to(&mut status, Some(2));
        assert!(!status.conditions.iter().any(|c| c.type_ == "Stalled"));
    }
}
