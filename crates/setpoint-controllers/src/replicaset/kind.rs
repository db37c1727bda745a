//! The two kinds the loop keeps replicas of, behind one trait ([`Replicated`]): ReplicaSets
//! (`apps/v1`, a structured `LabelSelector`) and ReplicationControllers (`core/v1`, whose
//! selector is a plain label map). Everything else — template, replica count,
//! `minReadySeconds`, the status fields and the `ReplicaFailure` condition — is the same, so
//! the loop is written once over the ReplicaSet shapes and a ReplicationController's status
//! goes through them (as kube-controller-manager's replication controller reuses its
//! ReplicaSet controller through an adapter).

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{PodTemplateSpec, ReplicationController};
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// A kind whose objects keep `replicas` pods from a template.
pub(crate) trait Replicated:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The loop's name, as kube-controller-manager names it (logs, metrics, Events).
    const CONTROLLER: &'static str;

    /// `spec.replicas` (1 when unset).
    fn replicas(&self) -> i32;

    /// `spec.minReadySeconds`.
    fn min_ready_seconds(&self) -> i32;

    /// The selector as a structured `LabelSelector` (JSON).
    fn selector_json(&self) -> Option<Value>;

    /// `spec.template`.
    fn template(&self) -> Option<&PodTemplateSpec>;

    /// The status, in ReplicaSet shape.
    fn replica_status(&self) -> Option<ReplicaSetStatus>;

    /// Sets the status from its ReplicaSet shape.
    fn set_replica_status(&mut self, status: ReplicaSetStatus);
}

impl Replicated for ReplicaSet {
    const CONTROLLER: &'static str = "replicaset-controller";

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn selector_json(&self) -> Option<Value> {
        serde_json::to_value(&self.spec.as_ref()?.selector).ok()
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn replica_status(&self) -> Option<ReplicaSetStatus> {
        self.status.clone()
    }

    fn set_replica_status(&mut self, status: ReplicaSetStatus) {
        self.status = Some(status);
    }
}

impl Replicated for ReplicationController {
    const CONTROLLER: &'static str = "replicationcontroller-controller";

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn selector_json(&self) -> Option<Value> {
        // The API server defaults an empty selector to the template's labels.
        let spec = self.spec.as_ref()?;
        let labels = spec
            .selector
            .clone()
            .filter(|s| !s.is_empty())
            .or_else(|| spec.template.as_ref()?.metadata.as_ref()?.labels.clone())?;
        Some(json!({ "matchLabels": labels }))
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn replica_status(&self) -> Option<ReplicaSetStatus> {
        // The two statuses have the same fields (conditions included) on the wire.
        serde_json::to_value(self.status.as_ref()?)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
    }

    fn set_replica_status(&mut self, status: ReplicaSetStatus) {
        self.status = serde_json::to_value(status)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replication_controller_should_select_by_its_map_or_its_template_labels() {
        let rc: ReplicationController = serde_json::from_value(json!({
            "metadata": {"name": "rc"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}}}}
        }))
        .expect("rc");
        assert_eq!(
            rc.selector_json(),
            Some(json!({"matchLabels": {"app": "web"}}))
        );
        assert_eq!(rc.replicas(), 1);
        let mut rc = rc;
        rc.set_replica_status(ReplicaSetStatus {
            replicas: 2,
            ready_replicas: Some(1),
            ..Default::default()
        });
        assert_eq!(
            rc.status.as_ref().map(|s| (s.replicas, s.ready_replicas)),
            Some((2, Some(1)))
        );
        assert_eq!(rc.replica_status().map(|s| s.replicas), Some(2));
    }
}
