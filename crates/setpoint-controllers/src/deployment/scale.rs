//! Resizing ReplicaSets: one at a time (with the `ScalingReplicaSet` Event and the replica
//! annotations kept current), and the Deployment's scaling step (Kubernetes' `scale`) — run
//! when the Deployment is paused or resized: a single active ReplicaSet takes the new size; a
//! saturated new ReplicaSet leaves the old ones at 0; otherwise, mid-rollout, the difference
//! is shared out proportionally ([`proportional_sizes`]).

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::PostParams;
use setpoint_runtime::EventDetails;

use super::annotations::{desired_replicas_annotation, set_replicas_annotations};
use super::error::DeploymentError;
use super::replicasets::{
    by_creation, by_size_newer, by_size_older, desired, is_active, spec_replicas, sum_spec,
};
use super::sizing::{max_surge, proportional_sizes, Strategy};
use super::sync::Rollout;

impl Rollout<'_> {
    /// Resizes ReplicaSet `i` to `size` unless it already is that size; whether it was
    /// resized (Kubernetes' `scaleReplicaSetAndRecordEvent`).
    pub(super) async fn scale_to(&mut self, i: usize, size: i32) -> Result<bool, DeploymentError> {
        if spec_replicas(&self.rses[i]) == size {
            return Ok(false);
        }
        self.resize(i, size).await?;
        Ok(true)
    }

    /// Sets ReplicaSet `i`'s size and replica annotations, writing if either changes; an
    /// Event if the size does (Kubernetes' `scaleReplicaSet`). The write carries the
    /// ReplicaSet's `resourceVersion`: made from a stale cache, it conflicts and the sync is
    /// retried.
    pub(super) async fn resize(&mut self, i: usize, size: i32) -> Result<(), DeploymentError> {
        let replicas = desired(&self.d);
        let mut updated = self.rses[i].clone();
        let before = spec_replicas(&updated);
        let annotated =
            set_replicas_annotations(&mut updated, replicas, replicas + max_surge(&self.d));
        if before == size && !annotated {
            return Ok(());
        }
        if let Some(spec) = updated.spec.as_mut() {
            spec.replicas = Some(size);
        }
        let written = self.replace_replicaset(&updated, "scaling").await?;
        self.rses[i] = written;
        if before != size {
            let direction = if before < size { "up" } else { "down" };
            let name = self.rses[i].metadata.name.clone().unwrap_or_default();
            self.ctx.recorder.publish_for(
                &self.d,
                EventDetails::normal("ScalingReplicaSet", "Scale").with_note(format!(
                    "Scaled {direction} replica set {name} from {before} to {size}"
                )),
            );
            tracing::info!(deployment = %self.key, replicaset = name, from = before, to = size, "scaled replica set");
        }
        Ok(())
    }

    /// Replaces a ReplicaSet with `updated`, recording the write in the expectations.
    pub(super) async fn replace_replicaset(
        &self,
        updated: &ReplicaSet,
        action: &'static str,
    ) -> Result<ReplicaSet, DeploymentError> {
        let namespace = updated.metadata.namespace.as_deref().unwrap_or_default();
        let name = updated.metadata.name.as_deref().unwrap_or_default();
        let written = self
            .ctx
            .client
            .namespaced_api::<ReplicaSet>(namespace)
            .replace(name, &PostParams::default(), updated)
            .await
            .map_err(|source| DeploymentError::ReplicaSet {
                action,
                deployment: self.key.to_string(),
                replicaset: name.to_owned(),
                source,
            })?;
        self.ctx.expect_written(&self.key, &written);
        Ok(written)
    }

    /// The one ReplicaSet that should take the Deployment's whole size: the only active one;
    /// with none active, the new one or else the newest old one; `None` when several are
    /// active (Kubernetes' `FindActiveOrLatest`).
    fn active_or_latest(&self) -> Option<usize> {
        let active: Vec<usize> = (0..self.rses.len())
            .filter(|i| is_active(&self.rses[*i]))
            .collect();
        match active.as_slice() {
            [] => self.new.or_else(|| {
                self.old_indices()
                    .into_iter()
                    .max_by(|a, b| by_creation(&self.rses[*a], &self.rses[*b]))
            }),
            [only] => Some(*only),
            _ => None,
        }
    }

    /// Whether the new ReplicaSet has the whole size, all available (Kubernetes'
    /// `IsSaturated`).
    fn is_saturated(&self) -> bool {
        let replicas = desired(&self.d);
        self.new_rs().is_some_and(|rs| {
            desired_replicas_annotation(rs) == Some(replicas)
                && spec_replicas(rs) == replicas
                && rs
                    .status
                    .as_ref()
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0)
                    == replicas
        })
    }

    /// The scaling step.
    pub(super) async fn scale(&mut self) -> Result<(), DeploymentError> {
        let replicas = desired(&self.d);
        if let Some(i) = self.active_or_latest() {
            self.scale_to(i, replicas).await?;
            return Ok(());
        }
        if self.is_saturated() {
            for i in self.old_indices() {
                if is_active(&self.rses[i]) {
                    self.scale_to(i, 0).await?;
                }
            }
            return Ok(());
        }
        if Strategy::of(&self.d) == Strategy::Recreate {
            return Ok(());
        }
        let mut active: Vec<usize> = (0..self.rses.len())
            .filter(|i| is_active(&self.rses[*i]))
            .collect();
        let allowed = if replicas > 0 {
            replicas + max_surge(&self.d)
        } else {
            0
        };
        let total = sum_spec(&active.iter().map(|i| &self.rses[*i]).collect::<Vec<_>>());
        if allowed - total > 0 {
            active.sort_by(|a, b| by_size_newer(&self.rses[*a], &self.rses[*b]));
        } else {
            active.sort_by(|a, b| by_size_older(&self.rses[*a], &self.rses[*b]));
        }
        let sizes = proportional_sizes(
            &self.d,
            &active.iter().map(|i| &self.rses[*i]).collect::<Vec<_>>(),
        );
        for (i, size) in active.into_iter().zip(sizes) {
            self.resize(i, size).await?;
        }
        Ok(())
    }
}
