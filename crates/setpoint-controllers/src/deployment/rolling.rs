//! The RollingUpdate step (Kubernetes' `rolloutRolling`): create the new ReplicaSet if
//! missing; grow it as far as `maxSurge` allows; otherwise shrink old ReplicaSets as far as
//! `maxUnavailable` allows — first the pods that are not available anyway (oldest ReplicaSet
//! first), then available ones; once complete, clean up old history; write the status.
//!
//! Invariants, given ReplicaSet statuses that are current or stale:
//! - pods in all ≤ `spec.replicas + maxSurge`: the new ReplicaSet grows only into room left
//!   by the pods each ReplicaSet may still have (the larger of its size and its last count);
//! - available pods ≥ `spec.replicas − maxUnavailable`: old ReplicaSets shrink only by the
//!   available pods beyond that, each ReplicaSet counted for no more available pods than it
//!   is asked for.

use setpoint_runtime::Action;

use super::error::DeploymentError;
use super::new_rs::Create;
use super::replicasets::{by_creation, desired, spec_replicas, sum_available, sum_spec};
use super::sizing::{max_unavailable, new_rs_new_replicas};
use super::status;
use super::sync::Rollout;

impl Rollout<'_> {
    /// One RollingUpdate step.
    pub(super) async fn rolling(&mut self) -> Result<Action, DeploymentError> {
        self.sync_new_replicaset(Create::Yes).await?;
        if self.reconcile_new().await? {
            return self.sync_rollout_status().await;
        }
        if self.reconcile_old().await? {
            return self.sync_rollout_status().await;
        }
        if status::complete(&self.d, &self.current_status()) {
            self.cleanup().await?;
        }
        self.sync_rollout_status().await
    }

    /// Grows (or, if the Deployment shrank, shrinks) the new ReplicaSet; whether it changed.
    async fn reconcile_new(&mut self) -> Result<bool, DeploymentError> {
        let Some(i) = self.new else {
            return Ok(false);
        };
        let replicas = desired(&self.d);
        let current = spec_replicas(&self.rses[i]);
        if current == replicas {
            return Ok(false);
        }
        if current > replicas {
            return self.scale_to(i, replicas).await;
        }
        let size = new_rs_new_replicas(&self.d, &self.all(), &self.rses[i]);
        self.scale_to(i, size).await
    }

    /// Shrinks old ReplicaSets within `maxUnavailable`; whether any shrank.
    async fn reconcile_old(&mut self) -> Result<bool, DeploymentError> {
        let old = self.old_indices();
        if sum_spec(&self.old()) == 0 {
            return Ok(false);
        }
        let Some(new) = self.new else {
            return Ok(false);
        };
        let min_available = desired(&self.d) - max_unavailable(&self.d);
        let new_rs = &self.rses[new];
        let new_unavailable = spec_replicas(new_rs) - sum_available(&[new_rs]);
        let max_scaled_down = sum_spec(&self.all()) - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        let cleaned = self.cleanup_unhealthy(&old, max_scaled_down).await?;
        let scaled = self.scale_down_old(&old).await?;
        Ok(cleaned + scaled > 0)
    }

    /// Shrinks old ReplicaSets by their pods that are not available, oldest first, at most
    /// `max` in all; how many.
    async fn cleanup_unhealthy(&mut self, old: &[usize], max: i32) -> Result<i32, DeploymentError> {
        let mut old = old.to_vec();
        old.sort_by(|a, b| by_creation(&self.rses[*a], &self.rses[*b]));
        let mut total = 0;
        for i in old {
            if total >= max {
                break;
            }
            let rs = &self.rses[i];
            let size = spec_replicas(rs);
            let unhealthy = size - sum_available(&[rs]);
            if size == 0 || unhealthy <= 0 {
                continue;
            }
            let down = (max - total).min(unhealthy);
            self.scale_to(i, size - down).await?;
            total += down;
        }
        Ok(total)
    }

    /// Shrinks old ReplicaSets, oldest first, by the available pods beyond
    /// `spec.replicas − maxUnavailable`; how many.
    async fn scale_down_old(&mut self, old: &[usize]) -> Result<i32, DeploymentError> {
        let min_available = desired(&self.d) - max_unavailable(&self.d);
        let available = sum_available(&self.all());
        if available <= min_available {
            return Ok(0);
        }
        let to_scale_down = available - min_available;
        let mut old = old.to_vec();
        old.sort_by(|a, b| by_creation(&self.rses[*a], &self.rses[*b]));
        let mut total = 0;
        for i in old {
            if total >= to_scale_down {
                break;
            }
            let size = spec_replicas(&self.rses[i]);
            if size == 0 {
                continue;
            }
            let down = size.min(to_scale_down - total);
            self.scale_to(i, size - down).await?;
            total += down;
        }
        Ok(total)
    }
}
