//! `Machine`: one node of a workload cluster, as upstream's `machine_types.go` defines it. Its
//! spec names the bootstrap config (what turns the machine into a node) and the infrastructure
//! machine (what runs it); its status says how far it got (`phase`, `initialization`,
//! `nodeRef`) and why (`conditions`).

use k8s_openapi::api::core::v1::NodeSystemInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    ConditionPolarity, ContractVersionedObjectReference, MachineAddress, MachineTaint,
    V1Beta1Condition, CONDITION_TYPE, DNS1123_SUBDOMAIN,
};

/// The desired state of a machine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Machine",
    plural = "machines",
    namespaced,
    status = "MachineStatus",
    derive = "PartialEq",
    shortname = "ma",
    category = "cluster-api",
    doc = "Machine is the Schema for the machines API: one node of a workload cluster.",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName","description":"Cluster"}"#,
    printcolumn = r#"{"name":"Node Name","type":"string","jsonPath":".status.nodeRef.name","description":"Node name associated with this machine"}"#,
    printcolumn = r#"{"name":"Provider ID","type":"string","jsonPath":".spec.providerID","description":"Provider ID","priority":10}"#,
    printcolumn = r#"{"name":"Failure domain","type":"string","jsonPath":".status.failureDomain","description":"The failure domain where the Machine has been scheduled"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status","description":"Machine pass all readiness checks"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status","description":"Machine is Ready for at least MinReadySeconds"}"#,
    printcolumn = r#"{"name":"Up-to-date","type":"string","jsonPath":".status.conditions[?(@.type==\"UpToDate\")].status","description":" Machine spec matches the spec of the Machine's owner resource, e.g. MachineDeployment"}"#,
    printcolumn = r#"{"name":"Internal-IP","type":"string","jsonPath":".status.addresses[?(@.type==\"InternalIP\")].address","description":"Internal IP of the machine","priority":10}"#,
    printcolumn = r#"{"name":"External-IP","type":"string","jsonPath":".status.addresses[?(@.type==\"ExternalIP\")].address","description":"External IP of the machine","priority":10}"#,
    printcolumn = r#"{"name":"OS-Image","type":"string","jsonPath":".status.nodeInfo.osImage","description":"OS Image reported by the node","priority":10}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type==\"Paused\")].status","description":"Reconciliation paused","priority":10}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase","description":"Machine status such as Terminating/Pending/Running/Failed etc"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time duration since creation of Machine"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version","description":"Kubernetes version associated with this Machine"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The Cluster this machine belongs to.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// What turns the machine into a node.
    pub bootstrap: Bootstrap,
    /// The infrastructure provider's object that runs the machine.
    pub infrastructure_ref: ContractVersionedObjectReference,
    /// The Kubernetes version the machine runs (`v1.33.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub version: Option<String>,
    /// The infrastructure's ID of the machine, matched with the node's `spec.providerID`.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    /// Where the machine should run (one of the Cluster's `status.failureDomains`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// How long the node must be ready before the machine counts as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    /// Further conditions that must hold for the machine to be ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["conditionType"]))]
    pub readiness_gates: Vec<MachineReadinessGate>,
    /// Timeouts of the machine's deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeletionSpec>,
    /// Taints put on the machine's node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key", "effect"]))]
    pub taints: Vec<MachineTaint>,
}

/// What turns a machine into a node: a bootstrap provider's config, or a Secret already made.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The bootstrap provider's config object (`KubeadmConfig`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ContractVersionedObjectReference>,
    /// The Secret holding the bootstrap data, when it is given rather than made by a provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 0, max = 253))]
    pub data_secret_name: Option<String>,
}

/// Timeouts of a machine's deletion, in seconds (0: wait forever).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineDeletionSpec {
    /// How long draining the node may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_drain_timeout_seconds: Option<i32>,
    /// How long waiting for the node's volumes to detach may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_volume_detach_timeout_seconds: Option<i32>,
    /// How long deleting the node may be retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_deletion_timeout_seconds: Option<i32>,
}

/// A condition of the machine that must hold for it to be ready.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineReadinessGate {
    /// The condition's type.
    #[schemars(length(min = 1, max = 316), pattern(CONDITION_TYPE))]
    pub condition_type: String,
    /// Whether the condition is good when `True` (default) or `False`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polarity: Option<ConditionPolarity>,
}

/// A machine's phase, in the order a machine goes through them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachinePhase {
    /// Created; waiting for its bootstrap data or infrastructure to be asked for.
    Pending,
    /// Its bootstrap data is ready; its infrastructure is being made.
    Provisioning,
    /// Its infrastructure exists and has a provider ID; no node yet.
    Provisioned,
    /// Its node exists.
    Running,
    /// Being updated in place.
    Updating,
    /// Being deleted.
    Deleting,
    /// Deleted; the object goes once its finalizer is removed.
    Deleted,
    /// Failed for good (v1beta1 only).
    Failed,
    /// Not known.
    Unknown,
}

/// What the machine controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineStatus {
    /// `Available`, `Ready`, `UpToDate`, `BootstrapConfigReady`, `InfrastructureReady`,
    /// `NodeReady`, `NodeHealthy`, `Deleting`, `Paused`, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Which provisioning steps are done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<MachineInitializationStatus>,
    /// The node of the machine in the workload cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<MachineNodeReference>,
    /// What the node reports about itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeSystemInfo>,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    /// The machine's addresses, from its infrastructure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Vec<MachineAddress>,
    /// Where the machine runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// The phase (see [`MachinePhase`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MachinePhase>,
    /// When the node's certificates expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificates_expiry_date: Option<Time>,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    /// When the steps of the deletion started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeletionStatus>,
    /// What v1beta1 clients read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<MachineDeprecatedStatus>,
}

/// Which provisioning steps of a machine are done.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineInitializationStatus {
    /// The infrastructure machine is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The bootstrap data Secret exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_secret_created: Option<bool>,
}

/// The node of a machine, by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineNodeReference {
    /// The node's name.
    #[schemars(length(min = 1, max = 253), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
}

/// When the steps of a machine's deletion started.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletionStatus {
    /// Draining the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_start_time: Option<Time>,
    /// Waiting for the node's volumes to detach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_node_volume_detach_start_time: Option<Time>,
    /// Waiting for the pre-drain hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_pre_drain_hook_start_time: Option<Time>,
    /// Waiting for the pre-terminate hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_pre_terminate_hook_start_time: Option<Time>,
}

/// A machine's status as v1beta1 clients read it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineDeprecatedStatus {
    /// The v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<MachineV1Beta1DeprecatedStatus>,
}

/// The v1beta1 fields of a machine's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineV1Beta1DeprecatedStatus {
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
