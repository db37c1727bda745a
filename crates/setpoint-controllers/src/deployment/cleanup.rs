//! Old history (Kubernetes' `cleanupDeployment`): beyond `revisionHistoryLimit` old
//! ReplicaSets, the lowest revisions are deleted — only those asked for and having no pods,
//! whose status is current and that are not already being deleted. Run when a rollout is
//! complete, and while paused.

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{DeleteParams, Preconditions};

use super::error::DeploymentError;
use super::replicasets::{by_revision, spec_replicas, status_replicas};
use super::sync::Rollout;

impl Rollout<'_> {
    /// Deletes the old ReplicaSets beyond the history limit.
    pub(super) async fn cleanup(&mut self) -> Result<(), DeploymentError> {
        let Some(limit) = self.d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
            return Ok(());
        };
        let mut cleanable: Vec<&ReplicaSet> = self
            .old()
            .into_iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .collect();
        let excess = cleanable
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        if excess == 0 {
            return Ok(());
        }
        cleanable.sort_by(|a, b| by_revision(a, b));
        let victims: Vec<ReplicaSet> = cleanable
            .into_iter()
            .take(excess)
            .filter(|rs| {
                let observed = rs
                    .status
                    .as_ref()
                    .and_then(|s| s.observed_generation)
                    .unwrap_or(0);
                status_replicas(rs) == 0
                    && spec_replicas(rs) == 0
                    && rs.metadata.generation.unwrap_or(0) <= observed
            })
            .cloned()
            .collect();
        for rs in victims {
            let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
            let name = rs.metadata.name.as_deref().unwrap_or_default();
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: rs.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            self.ctx.expect_deleted(&self.key, &rs);
            let result = self
                .ctx
                .client
                .namespaced_api::<ReplicaSet>(namespace)
                .delete(name, &params)
                .await;
            match result {
                Ok(_) => {
                    tracing::info!(deployment = %self.key, replicaset = name, "deleted old replica set")
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                    self.ctx.expectations.observed_gone(&self.key, name);
                }
                Err(source) => {
                    self.ctx.expectations.observed_gone(&self.key, name);
                    return Err(DeploymentError::ReplicaSet {
                        action: "deleting",
                        deployment: self.key.to_string(),
                        replicaset: name.to_owned(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}
