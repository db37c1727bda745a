//! `Cluster`: a whole workload cluster as one object, as upstream's `cluster_types.go` defines
//! it. Its spec names the infrastructure cluster and the control plane (or a ClusterClass
//! topology, `topology.rs`) and the cluster's network; its status carries the phase,
//! `initialization`, the control plane's and workers' replica counts and the conditions.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    ConditionPolarity, ContractVersionedObjectReference, StatusUpgradePlanVersion, StatusVersion,
    V1Beta1Condition, CONDITION_TYPE,
};
use super::topology::Topology;

/// The desired state of a cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    plural = "clusters",
    namespaced,
    status = "ClusterStatus",
    derive = "PartialEq",
    shortname = "cl",
    category = "cluster-api",
    doc = "Cluster is the Schema for the clusters API: a whole workload cluster.",
    printcolumn = r#"{"name":"ClusterClass","type":"string","jsonPath":".spec.topology.classRef.name","description":"ClusterClass of this Cluster, empty if the Cluster is not using a ClusterClass"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status","description":"Cluster pass all availability checks"}"#,
    printcolumn = r#"{"name":"CP Desired","type":"integer","jsonPath":".status.controlPlane.desiredReplicas","description":"The desired number of control plane machines"}"#,
    printcolumn = r#"{"name":"CP Current","type":"integer","jsonPath":".status.controlPlane.replicas","description":"The number of control plane machines","priority":10}"#,
    printcolumn = r#"{"name":"CP Ready","type":"integer","jsonPath":".status.controlPlane.readyReplicas","description":"The number of control plane machines with Ready condition true","priority":10}"#,
    printcolumn = r#"{"name":"CP Available","type":"integer","jsonPath":".status.controlPlane.availableReplicas","description":"The number of control plane machines with Available condition true"}"#,
    printcolumn = r#"{"name":"CP Up-to-date","type":"integer","jsonPath":".status.controlPlane.upToDateReplicas","description":"The number of control plane machines with UpToDate condition true"}"#,
    printcolumn = r#"{"name":"W Desired","type":"integer","jsonPath":".status.workers.desiredReplicas","description":"The desired number of worker machines"}"#,
    printcolumn = r#"{"name":"W Current","type":"integer","jsonPath":".status.workers.replicas","description":"The number of worker machines","priority":10}"#,
    printcolumn = r#"{"name":"W Ready","type":"integer","jsonPath":".status.workers.readyReplicas","description":"The number of worker machines with Ready condition true","priority":10}"#,
    printcolumn = r#"{"name":"W Available","type":"integer","jsonPath":".status.workers.availableReplicas","description":"The number of worker machines with Available condition true"}"#,
    printcolumn = r#"{"name":"W Up-to-date","type":"integer","jsonPath":".status.workers.upToDateReplicas","description":"The number of worker machines with UpToDate condition true"}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type==\"Paused\")].status","description":"Reconciliation paused","priority":10}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase","description":"Cluster status such as Pending/Provisioning/Provisioned/Deleting/Failed"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time duration since creation of Cluster"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.topology.version","description":"Kubernetes version associated with this Cluster"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ClusterSpec {
    /// Stops every controller from changing the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The cluster's network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_network: Option<ClusterNetwork>,
    /// Where the cluster's API server is reached (set by the infrastructure provider when
    /// empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// The control plane provider's object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ContractVersionedObjectReference>,
    /// The infrastructure provider's cluster object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractVersionedObjectReference>,
    /// The cluster described through a ClusterClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// Further conditions that must hold for the cluster to be available.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["conditionType"]))]
    pub availability_gates: Vec<ClusterAvailabilityGate>,
}

/// A condition of the cluster that must hold for it to be available.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAvailabilityGate {
    /// The condition's type.
    #[schemars(length(min = 1, max = 316), pattern(CONDITION_TYPE))]
    pub condition_type: String,
    /// Whether the condition is good when `True` (default) or `False`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polarity: Option<ConditionPolarity>,
}

/// A cluster's network.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ClusterNetwork {
    /// The port the API servers listen on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub api_server_port: Option<i32>,
    /// The Services' address ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<NetworkRanges>,
    /// The pods' address ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NetworkRanges>,
    /// The Services' DNS domain (`cluster.local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_domain: Option<String>,
}

/// Address ranges.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRanges {
    /// CIDR blocks.
    #[serde(rename = "cidrBlocks")]
    #[schemars(length(min = 1, max = 100), inner(length(min = 1, max = 43)), extend("x-kubernetes-list-type" = "atomic"))]
    pub cidr_blocks: Vec<String>,
}

/// Where an API server is reached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct ApiEndpoint {
    /// Host name or address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub host: Option<String>,
    /// Port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// A cluster's phase.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ClusterPhase {
    /// Created; nothing provisioned yet.
    Pending,
    /// Its infrastructure is being provisioned.
    Provisioning,
    /// Its infrastructure is provisioned (and its control plane endpoint known).
    Provisioned,
    /// Being deleted.
    Deleting,
    /// Failed for good (v1beta1 only).
    Failed,
    /// Not known.
    Unknown,
}

/// What the cluster controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ClusterStatus {
    /// `Available`, `InfrastructureReady`, `ControlPlaneAvailable`, `ControlPlaneInitialized`,
    /// `WorkersAvailable`, `RemoteConnectionProbe`, `Deleting`, `Paused`, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Which provisioning steps are done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitializationStatus>,
    /// The control plane's machine counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ClusterReplicasStatus>,
    /// The workers' machine counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<ClusterReplicasStatus>,
    /// Where machines may run, from the infrastructure cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub failure_domains: Vec<FailureDomain>,
    /// The phase (see [`ClusterPhase`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClusterPhase>,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    /// What v1beta1 clients read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<ClusterDeprecatedStatus>,
}

/// Which provisioning steps of a cluster are done.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ClusterInitializationStatus {
    /// The infrastructure cluster is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The control plane answers (its first machine is up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// Machine counts of a cluster's control plane or workers (upstream's
/// `ClusterControlPlaneStatus` and `WorkersStatus`, of one shape).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReplicasStatus {
    /// How many machines are wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<i32>,
    /// How many exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How many are `UpToDate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// How many are `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// How many are `Available`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// How many machines run each version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "atomic"))]
    pub versions: Vec<StatusVersion>,
    /// The versions an upgrade goes through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "atomic"))]
    pub upgrade_plan: Vec<StatusUpgradePlanVersion>,
}

/// A failure domain: a place machines may run in.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Its name.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Whether control-plane machines may run there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Provider-specific attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
}

/// A cluster's status as v1beta1 clients read it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ClusterDeprecatedStatus {
    /// The v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<ClusterV1Beta1DeprecatedStatus>,
}

/// The v1beta1 fields of a cluster's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterV1Beta1DeprecatedStatus {
    /// Conditions in v1beta1's shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
    /// A terminal problem, in one word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// A terminal problem, for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10240))]
    pub failure_message: Option<String>,
}
