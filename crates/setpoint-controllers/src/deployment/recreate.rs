//! The Recreate step (Kubernetes' `rolloutRecreate`): scale every old ReplicaSet to 0; wait
//! until none of their pods is left (terminating pods still count: a pod being stopped may
//! still be running); only then create the new ReplicaSet (if missing) and give it the whole
//! size. So old and new pods never exist at once.

use setpoint_runtime::owner::controller_ref;
use setpoint_runtime::Action;

use super::error::DeploymentError;
use super::new_rs::Create;
use super::replicasets::{desired, is_active, sum_status};
use super::status;
use super::sync::Rollout;

impl Rollout<'_> {
    /// One Recreate step.
    pub(super) async fn recreate(&mut self) -> Result<Action, DeploymentError> {
        let mut scaled_down = false;
        for i in self.old_indices() {
            if is_active(&self.rses[i]) {
                scaled_down |= self.scale_to(i, 0).await?;
            }
        }
        if scaled_down || self.old_pods_running() {
            return self.sync_rollout_status().await;
        }
        if self.new.is_none() {
            self.sync_new_replicaset(Create::Yes).await?;
        }
        if let Some(i) = self.new {
            self.scale_to(i, desired(&self.d)).await?;
        }
        if status::complete(&self.d, &self.current_status()) {
            self.cleanup().await?;
        }
        self.sync_rollout_status().await
    }

    /// Whether any old ReplicaSet still reports pods, or the pod cache still has a pod one of
    /// them controls that has not finished (terminating ones included).
    fn old_pods_running(&self) -> bool {
        if sum_status(&self.old()) > 0 {
            return true;
        }
        let old_uids: Vec<&str> = self
            .old()
            .iter()
            .filter_map(|rs| rs.metadata.uid.as_deref())
            .collect();
        let namespace = self.d.metadata.namespace.as_deref().unwrap_or_default();
        self.ctx.pods.list_namespace(namespace).iter().any(|pod| {
            let finished = matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            !finished
                && controller_ref(&pod.metadata).is_some_and(|r| old_uids.contains(&r.uid.as_str()))
        })
    }
}
