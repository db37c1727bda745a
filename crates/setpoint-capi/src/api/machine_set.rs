//! `MachineSet`: keeps `replicas` machines made from one template, as upstream's
//! `machineset_types.go` defines it (what a ReplicaSet is to pods). Also the template and
//! naming types a MachineDeployment shares. Its scale subresource reads `.spec.replicas`,
//! `.status.replicas` and `.status.selector`, as upstream's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ObjectMeta, StatusVersion, V1Beta1Condition};
use super::machine::MachineSpec;

/// The desired state of a machine set.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineSet",
    plural = "machinesets",
    namespaced,
    status = "MachineSetStatus",
    derive = "PartialEq",
    shortname = "ms",
    category = "cluster-api",
    doc = "MachineSet is the Schema for the machinesets API: replicas of one machine template.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName","description":"Cluster"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas","description":"The desired number of machines"}"#,
    printcolumn = r#"{"name":"Current","type":"integer","jsonPath":".status.replicas","description":"The number of machines"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas","description":"The number of machines with Ready condition true"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas","description":"The number of machines with Available condition true"}"#,
    printcolumn = r#"{"name":"Up-to-date","type":"integer","jsonPath":".status.upToDateReplicas","description":"The number of machines with UpToDate condition true"}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type==\"Paused\")].status","description":"Reconciliation paused","priority":10}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time duration since creation of MachineSet"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.template.spec.version","description":"Kubernetes version associated with this MachineSet"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// The Cluster the machines belong to.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// How many machines (unset: upstream's defaulting webhook decides; see the crate docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Which machines are the set's; must match the template's labels.
    pub selector: LabelSelector,
    /// What each machine is made from.
    pub template: MachineTemplateSpec,
    /// How the machines are named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_naming: Option<MachineNamingSpec>,
    /// Which machines go first when scaling down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineSetDeletionSpec>,
}

/// A machine template: labels and annotations, and the machine's spec.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct MachineTemplateSpec {
    /// Labels and annotations of each machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The spec of each machine.
    pub spec: MachineSpec,
}

/// How machines are named.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct MachineNamingSpec {
    /// A Go template over `.cluster.name`, `.machineSet.name` and `.random`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub template: Option<String>,
}

/// Which machines go first when a set scales down.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct MachineSetDeletionSpec {
    /// The order (default `Random`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<MachineSetDeletionOrder>,
}

/// The order in which a set's machines are deleted when it scales down. In every order,
/// machines marked for deletion, unhealthy and not yet ready ones go first.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineSetDeletionOrder {
    /// Any machine.
    Random,
    /// The most recently created first.
    Newest,
    /// The oldest first.
    Oldest,
}

/// What the machine set controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineSetStatus {
    /// `MachinesReady`, `MachinesUpToDate`, `ScalingUp`, `ScalingDown`, `Remediating`,
    /// `Deleting`, `Paused`, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The selector as a string, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub selector: Option<String>,
    /// How many machines the set has.
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
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    /// What v1beta1 clients read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<MachineSetDeprecatedStatus>,
}

/// A machine set's status as v1beta1 clients read it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineSetDeprecatedStatus {
    /// The v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<MachineSetV1Beta1DeprecatedStatus>,
}

/// The v1beta1 fields of a machine set's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetV1Beta1DeprecatedStatus {
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
    /// Machines whose labels match the template's (always written, as upstream's).
    #[serde(default)]
    pub fully_labeled_replicas: i32,
    /// Machines whose node is ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Machines ready for at least `minReadySeconds`.
    #[serde(default)]
    pub available_replicas: i32,
}
