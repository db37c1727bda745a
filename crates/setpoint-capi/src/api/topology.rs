//! A Cluster's `spec.topology`: the cluster described through a ClusterClass (its version, its
//! control plane and its worker MachineDeployments and MachinePools, variables), as upstream's
//! `cluster_types.go` defines it. Setpoint serves the field so that manifests using it apply
//! and keep every field; ClusterClass itself and the topology controller are not built yet.
//!
//! Where upstream declares two Go types of the same JSON shape (the control plane's and the
//! pools' deletion timeouts, the three kinds of variable overrides, a MachineDeployment's rollout), one Rust type serves both.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{MachineTaint, ObjectMeta, DNS1123_SUBDOMAIN};
use super::machine::{MachineDeletionSpec, MachineReadinessGate};
use super::machine_deployment::MachineDeploymentRolloutSpec;
use super::machine_health_check::{
    MachineHealthCheckChecks, MachineHealthCheckRemediationTemplateReference,
    MachineHealthCheckRemediationTriggerIf,
};
use super::machine_set::MachineSetDeletionOrder;

/// A cluster described through a ClusterClass.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// The ClusterClass.
    pub class_ref: ClusterClassRef,
    /// The Kubernetes version of the cluster.
    #[schemars(length(min = 1, max = 256))]
    pub version: String,
    /// The control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneTopology>,
    /// The worker machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersTopology>,
    /// Values of the ClusterClass's variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 1000), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub variables: Vec<ClusterVariable>,
}

/// A ClusterClass, by name (and namespace: default the Cluster's).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ClusterClassRef {
    /// Its name.
    #[schemars(length(min = 1, max = 253), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Its namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub namespace: Option<String>,
}

/// The control plane of a topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ControlPlaneTopology {
    /// Labels and annotations of the control plane object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// How many control-plane machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// When the control plane's machines are rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<ControlPlaneTopologyRolloutSpec>,
    /// The control plane's machine health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<TopologyHealthCheck<TopologyRemediation>>,
    /// Timeouts of the machines' deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeletionSpec>,
    /// Taints of the machines' nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key", "effect"]))]
    pub taints: Vec<MachineTaint>,
    /// Further conditions for the machines to be ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["conditionType"]))]
    pub readiness_gates: Vec<MachineReadinessGate>,
    /// Variable overrides for the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<TopologyVariables>,
}

/// When a topology's control-plane machines are rolled out.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct ControlPlaneTopologyRolloutSpec {
    /// Every machine created before this time is replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Time>,
}

/// A health check a topology asks for: its checks and remediation (`R`: the control plane's
/// or a MachineDeployment's, which also has `maxInFlight`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TopologyHealthCheck<R> {
    /// Whether the health check is made (default: when the ClusterClass defines one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// What makes a machine unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<MachineHealthCheckChecks>,
    /// When and how unhealthy machines are remediated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<R>,
}

/// Remediation of a topology's control-plane health check.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TopologyRemediation {
    /// Remediation happens only while this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_if: Option<MachineHealthCheckRemediationTriggerIf>,
    /// An external remediation template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_ref: Option<MachineHealthCheckRemediationTemplateReference>,
}

/// Remediation of a topology MachineDeployment's health check.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentTopologyRemediation {
    /// How many machines may be remediated at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<IntOrString>,
    /// Remediation happens only while this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_if: Option<MachineHealthCheckRemediationTriggerIf>,
    /// An external remediation template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_ref: Option<MachineHealthCheckRemediationTemplateReference>,
}

/// The worker machines of a topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct WorkersTopology {
    /// MachineDeployments, each of a class of the ClusterClass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 2000), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub machine_deployments: Vec<MachineDeploymentTopology>,
    /// MachinePools, each of a class of the ClusterClass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 2000), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub machine_pools: Vec<MachinePoolTopology>,
}

/// A MachineDeployment of a topology.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentTopology {
    /// Labels and annotations of the MachineDeployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// Its class in the ClusterClass.
    #[schemars(length(min = 1, max = 256))]
    pub class: String,
    /// Its name in the topology.
    #[schemars(length(min = 1, max = 63), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Where its machines run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// How many machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Its machine health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<TopologyHealthCheck<MachineDeploymentTopologyRemediation>>,
    /// Deletion order and timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeploymentTopologyMachineDeletionSpec>,
    /// Taints of the machines' nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key", "effect"]))]
    pub taints: Vec<MachineTaint>,
    /// How long a node must be ready before its machine counts as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    /// Further conditions for the machines to be ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["conditionType"]))]
    pub readiness_gates: Vec<MachineReadinessGate>,
    /// How a changed template is rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<MachineDeploymentRolloutSpec>,
    /// Variable overrides for this MachineDeployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<TopologyVariables>,
}

/// Deletion order and timeouts of a topology MachineDeployment's machines.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentTopologyMachineDeletionSpec {
    /// Which machines go first when scaling down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<MachineSetDeletionOrder>,
    /// How long draining a node may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_drain_timeout_seconds: Option<i32>,
    /// How long waiting for a node's volumes to detach may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_volume_detach_timeout_seconds: Option<i32>,
    /// How long deleting a node may be retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_deletion_timeout_seconds: Option<i32>,
}

/// A MachinePool of a topology.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolTopology {
    /// Labels and annotations of the MachinePool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// Its class in the ClusterClass.
    #[schemars(length(min = 1, max = 256))]
    pub class: String,
    /// Its name in the topology.
    #[schemars(length(min = 1, max = 63), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Where its machines run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100), inner(length(min = 1, max = 256)), extend("x-kubernetes-list-type" = "atomic"))]
    pub failure_domains: Vec<String>,
    /// Timeouts of the machines' deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeletionSpec>,
    /// Taints of the machines' nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key", "effect"]))]
    pub taints: Vec<MachineTaint>,
    /// How long a node must be ready before its machine counts as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    /// How many machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Variable overrides for this MachinePool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<TopologyVariables>,
}

/// The value of one ClusterClass variable.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ClusterVariable {
    /// The variable's name.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Its value: any JSON, checked against the ClusterClass's schema for it.
    #[schemars(schema_with = "any_json")]
    pub value: serde_json::Value,
}

/// Variable overrides of a part of a topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TopologyVariables {
    /// Values that replace the Cluster's for this part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 1000), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub overrides: Vec<ClusterVariable>,
}

/// The schema of a field that holds any JSON value.
fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}
