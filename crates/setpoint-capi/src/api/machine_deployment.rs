//! `MachineDeployment`: rolls a machine template out through MachineSets, as upstream's
//! `machinedeployment_types.go` defines it (what a Deployment is to ReplicaSets). Its scale
//! subresource reads `.spec.replicas`, `.status.replicas` and `.status.selector`, as upstream's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{StatusVersion, V1Beta1Condition};
use super::machine_set::{MachineNamingSpec, MachineSetDeletionOrder, MachineTemplateSpec};

/// The desired state of a machine deployment.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineDeployment",
    plural = "machinedeployments",
    namespaced,
    status = "MachineDeploymentStatus",
    derive = "PartialEq",
    shortname = "md",
    category = "cluster-api",
    doc = "MachineDeployment is the Schema for the machinedeployments API: a machine template rolled out through MachineSets.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName","description":"Cluster"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status","description":"Cluster pass all availability checks"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas","description":"The desired number of machines"}"#,
    printcolumn = r#"{"name":"Current","type":"integer","jsonPath":".status.replicas","description":"The number of machines"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas","description":"The number of machines with Ready condition true"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas","description":"The number of machines with Available condition true"}"#,
    printcolumn = r#"{"name":"Up-to-date","type":"integer","jsonPath":".status.upToDateReplicas","description":"The number of machines with UpToDate condition true"}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type==\"Paused\")].status","description":"Reconciliation paused","priority":10}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase","description":"MachineDeployment status such as ScalingUp/ScalingDown/Running/Failed/Unknown"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time duration since creation of MachineDeployment"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.template.spec.version","description":"Kubernetes version associated with this MachineDeployment"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// The Cluster the machines belong to.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// How many machines (unset: upstream's defaulting webhook decides; see the crate docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How a changed template is rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<MachineDeploymentRolloutSpec>,
    /// Which machines are the deployment's; must match the template's labels.
    pub selector: LabelSelector,
    /// What each machine is made from.
    pub template: MachineTemplateSpec,
    /// How the machines are named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_naming: Option<MachineNamingSpec>,
    /// How unhealthy machines are replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<MachineDeploymentRemediationSpec>,
    /// Which machines go first when scaling down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeploymentDeletionSpec>,
    /// Stops rolling out and scaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// How a machine deployment rolls out.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentRolloutSpec {
    /// Every machine created before this time is replaced (a rollout "now").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Time>,
    /// The strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MachineDeploymentRolloutStrategy>,
}

/// A rollout strategy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentRolloutStrategy {
    /// `RollingUpdate` or `OnDelete`.
    #[serde(rename = "type")]
    pub kind: MachineDeploymentRolloutStrategyType,
    /// The limits of a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<MachineDeploymentRolloutStrategyRollingUpdate>,
}

/// How old machines are replaced.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineDeploymentRolloutStrategyType {
    /// New machines are made and old ones deleted within `maxSurge` and `maxUnavailable`.
    RollingUpdate,
    /// Old machines are replaced only when someone deletes them.
    OnDelete,
}

/// The limits of a rolling update (a count or a percentage of `replicas`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentRolloutStrategyRollingUpdate {
    /// How many machines may be unavailable during the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// How many machines may exist above `replicas` during the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
}

/// How a machine deployment's unhealthy machines are replaced.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentRemediationSpec {
    /// How many machines may be remediated at once (a count or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<IntOrString>,
}

/// Which machines of a deployment go first when it scales down.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentDeletionSpec {
    /// The order (default `Random`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<MachineSetDeletionOrder>,
}

/// A machine deployment's phase.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineDeploymentPhase {
    /// Fewer machines than `replicas`.
    ScalingUp,
    /// More machines than `replicas`.
    ScalingDown,
    /// As many machines as `replicas`.
    Running,
    /// Failed (v1beta1 only).
    Failed,
    /// Not known.
    Unknown,
}

/// What the machine deployment controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeploymentStatus {
    /// `Available`, `MachinesReady`, `MachinesUpToDate`, `RollingOut`, `ScalingUp`,
    /// `ScalingDown`, `Remediating`, `Deleting`, `Paused`, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    /// The selector as a string, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub selector: Option<String>,
    /// How many machines the deployment has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How many of them are `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// How many of them are `Available`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// How many of them are `UpToDate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// How many machines run each version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["version"]))]
    pub versions: Vec<StatusVersion>,
    /// The phase (see [`MachineDeploymentPhase`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MachineDeploymentPhase>,
    /// What v1beta1 clients read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<MachineDeploymentDeprecatedStatus>,
}

/// A machine deployment's status as v1beta1 clients read it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineDeploymentDeprecatedStatus {
    /// The v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<MachineDeploymentV1Beta1DeprecatedStatus>,
}

/// The v1beta1 fields of a machine deployment's status (the counts always written, as
/// upstream's).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentV1Beta1DeprecatedStatus {
    /// Conditions in v1beta1's shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
    /// Machines made from the current template.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Machines whose node is ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Machines ready for at least `minReadySeconds`.
    #[serde(default)]
    pub available_replicas: i32,
    /// Machines not available.
    #[serde(default)]
    pub unavailable_replicas: i32,
}
