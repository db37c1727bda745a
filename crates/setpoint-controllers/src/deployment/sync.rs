//! One sync of one Deployment (Kubernetes' `syncDeployment`): wait until the cache shows the
//! previous sync's ReplicaSet writes; claim the ReplicaSets; then
//!
//! - being deleted: only the status;
//! - paused (or resized with no rollout to make): only scaling ([`Rollout::scale`]), the
//!   `DeploymentPaused`/`DeploymentResumed` condition, and history cleanup while paused;
//! - otherwise the strategy's step: [`Rollout::rolling`] or [`Rollout::recreate`].
//!
//! [`Rollout`] holds what one sync knows: the Deployment (its status and revision annotation
//! updated as this sync writes them) and its ReplicaSets (replaced by what the server returns
//! for each write).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::jiff::Timestamp;
use setpoint_runtime::{update_status, Action, EventDetails, ObjectKey};

use super::annotations::{desired_replicas_annotation, REVISION};
use super::claim::claim_replicasets;
use super::error::DeploymentError;
use super::new_rs::Create;
use super::replicasets::{desired, is_active, selector_of};
use super::sizing::Strategy;
use super::status;
use super::Context;

/// Margin added to a wait, so the sync after it finds the wait over.
const WAIT_MARGIN: Duration = Duration::from_millis(50);

/// What one sync knows and has written.
pub(super) struct Rollout<'a> {
    pub(super) ctx: &'a Context,
    /// The Deployment's key, for logs, errors and expectations.
    pub(super) key: ObjectKey,
    /// The Deployment as this sync sees it; `status` and the revision annotation are what the
    /// server has after this sync's writes.
    pub(super) d: Deployment,
    /// Its claimed ReplicaSets, each as last read or written.
    pub(super) rses: Vec<ReplicaSet>,
    /// The index of the new ReplicaSet in `rses`, once found or created.
    pub(super) new: Option<usize>,
    /// The Deployment's revision annotation as the server has it.
    written_revision: Option<String>,
}

impl<'a> Rollout<'a> {
    /// The ReplicaSets, all of them.
    pub(super) fn all(&self) -> Vec<&ReplicaSet> {
        self.rses.iter().collect()
    }

    /// The new ReplicaSet, if any.
    pub(super) fn new_rs(&self) -> Option<&ReplicaSet> {
        self.new.map(|i| &self.rses[i])
    }

    /// The indices of the old ReplicaSets (every one but the new).
    pub(super) fn old_indices(&self) -> Vec<usize> {
        (0..self.rses.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    /// The old ReplicaSets.
    pub(super) fn old(&self) -> Vec<&ReplicaSet> {
        self.old_indices()
            .into_iter()
            .map(|i| &self.rses[i])
            .collect()
    }

    /// The Deployment's current status (empty if none yet).
    pub(super) fn current_status(&self) -> DeploymentStatus {
        self.d.status.clone().unwrap_or_default()
    }

    /// Writes `new` as the Deployment's status, with the revision annotation this sync set, if
    /// either differs from what the server had when this sync began (or last wrote).
    pub(super) async fn write_status(
        &mut self,
        new: DeploymentStatus,
    ) -> Result<(), DeploymentError> {
        let revision = annotation(&self.d, REVISION);
        if self.d.status.as_ref() == Some(&new) && revision == self.written_revision {
            return Ok(());
        }
        let namespace = self.d.metadata.namespace.clone().unwrap_or_default();
        let name = self.d.metadata.name.clone().unwrap_or_default();
        let api = self.ctx.client.namespaced_api::<Deployment>(&namespace);
        let written = update_status(&api, &name, |fresh: &mut Deployment| {
            fresh.status = Some(new.clone());
            if let Some(revision) = &revision {
                fresh
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(REVISION.to_owned(), revision.clone());
            }
        })
        .await
        .map_err(|source| DeploymentError::Status {
            deployment: self.key.to_string(),
            source,
        })?
        .into_object();
        self.d.status = Some(new);
        self.d.metadata.resource_version = written.metadata.resource_version;
        self.written_revision = revision;
        Ok(())
    }
}

/// An annotation of the Deployment.
fn annotation(d: &Deployment, key: &str) -> Option<String> {
    d.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Syncs `d`. Cancel-safe in the SDK's sense: a cancelled sync may have written some
/// ReplicaSets, which the expectations already account for.
pub(super) async fn reconcile(
    d: Arc<Deployment>,
    ctx: Arc<Context>,
) -> Result<Action, DeploymentError> {
    let key = ObjectKey::of(d.as_ref());
    let Some(selector) = selector_of(&d) else {
        ctx.recorder.publish_for(
            d.as_ref(),
            EventDetails::warning("SelectingAll", "Sync").with_note(
                "This deployment is selecting all pods. A non-empty selector is required.",
            ),
        );
        return Ok(Action::await_change());
    };
    if let Some(wait) = ctx.expectations.wait_for(&key) {
        // The ReplicaSet events that complete the record enqueue this Deployment.
        tracing::debug!(deployment = %key, ?wait, "waiting for the cache to show earlier writes");
        return Ok(Action::requeue(wait + WAIT_MARGIN));
    }
    let rses = claim_replicasets(&ctx, &d, &selector).await?;
    let mut r = Rollout {
        ctx: &ctx,
        key,
        written_revision: annotation(&d, REVISION),
        d: d.as_ref().clone(),
        rses,
        new: None,
    };
    if d.metadata.deletion_timestamp.is_some() {
        r.sync_new_replicaset(Create::No).await?;
        r.sync_status().await?;
        return Ok(Action::await_change());
    }
    r.check_paused_conditions().await?;
    r.sync_new_replicaset(Create::No).await?;
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    if paused || r.is_scaling_event() {
        r.scale().await?;
        if paused {
            r.cleanup().await?;
        }
        r.sync_status().await?;
        return Ok(Action::await_change());
    }
    match Strategy::of(&d) {
        Strategy::Recreate => r.recreate().await,
        Strategy::RollingUpdate { .. } => r.rolling().await,
    }
}

impl Rollout<'_> {
    /// Writes the status computed from the ReplicaSets, conditions aside from `Available` as
    /// they are (Kubernetes' `syncDeploymentStatus`).
    pub(super) async fn sync_status(&mut self) -> Result<(), DeploymentError> {
        let new = status::calculate(&self.d, &self.all(), self.new_rs(), Timestamp::now());
        self.write_status(new).await
    }

    /// Writes the status after a rollout step, with the `Progressing` condition; when nothing
    /// changed, asks to look again at the progress deadline (Kubernetes' `syncRolloutStatus`).
    pub(super) async fn sync_rollout_status(&mut self) -> Result<Action, DeploymentError> {
        let now = Timestamp::now();
        let new = status::rollout(&self.d, &self.all(), self.new_rs(), now);
        if self.d.status.as_ref() == Some(&new) {
            return Ok(status::recheck_in(&self.d, &new, now)
                .map_or(Action::await_change(), Action::requeue));
        }
        self.write_status(new).await?;
        Ok(Action::await_change())
    }

    /// Sets `DeploymentPaused` / `DeploymentResumed` if due.
    async fn check_paused_conditions(&mut self) -> Result<(), DeploymentError> {
        let Some(c) = status::paused_condition(&self.d, Timestamp::now()) else {
            return Ok(());
        };
        let mut new = self.current_status();
        status::set_condition(&mut new, c);
        self.write_status(new).await
    }

    /// Whether `spec.replicas` changed since the active ReplicaSets were last sized.
    fn is_scaling_event(&self) -> bool {
        let replicas = desired(&self.d);
        self.rses
            .iter()
            .filter(|rs| is_active(rs))
            .filter_map(desired_replicas_annotation)
            .any(|annotated| annotated != replicas)
    }
}
