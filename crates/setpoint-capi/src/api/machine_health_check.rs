//! `MachineHealthCheck`: which machines of a cluster count as unhealthy (node conditions held
//! too long, no node in time) and when they are remediated, as upstream's
//! `machinehealthcheck_types.go` defines it. The check and remediation types are shared with
//! the Cluster's topology (`topology.rs`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{V1Beta1Condition, CONDITION_TYPE, DNS1123_SUBDOMAIN, KIND};

/// The desired state of a machine health check.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineHealthCheck",
    plural = "machinehealthchecks",
    namespaced,
    status = "MachineHealthCheckStatus",
    derive = "PartialEq",
    shortname = "mhc",
    shortname = "mhcs",
    category = "cluster-api",
    doc = "MachineHealthCheck is the Schema for the machinehealthchecks API: when a cluster's machines are unhealthy, and how they are remediated.",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName","description":"Cluster"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.expectedMachines","description":"Number of machines currently monitored"}"#,
    printcolumn = r#"{"name":"Healthy","type":"integer","jsonPath":".status.currentHealthy","description":"Current observed healthy machines"}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type==\"Paused\")].status","description":"Reconciliation paused","priority":10}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp","description":"Time duration since creation of MachineHealthCheck"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckSpec {
    /// The Cluster whose machines are checked.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// Which machines are checked.
    pub selector: LabelSelector,
    /// What makes a machine unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<MachineHealthCheckChecks>,
    /// When and how unhealthy machines are remediated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<MachineHealthCheckRemediation>,
}

/// What makes a machine unhealthy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineHealthCheckChecks {
    /// How long a machine may go without a node (0: forever; upstream's webhook defaults it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_startup_timeout_seconds: Option<i32>,
    /// Node conditions that make the machine unhealthy once held for their timeout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100), extend("x-kubernetes-list-type" = "atomic"))]
    pub unhealthy_node_conditions: Vec<UnhealthyNodeCondition>,
    /// Machine conditions that make the machine unhealthy once held for their timeout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100), extend("x-kubernetes-list-type" = "atomic"))]
    pub unhealthy_machine_conditions: Vec<UnhealthyMachineCondition>,
}

/// A node condition that makes its machine unhealthy once held for `timeoutSeconds`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyNodeCondition {
    /// The node condition's type (`Ready`).
    #[serde(rename = "type")]
    #[schemars(length(min = 1))]
    pub kind: String,
    /// Its status (`False`, `Unknown`).
    #[schemars(length(min = 1))]
    pub status: String,
    /// How long it must hold.
    #[schemars(range(min = 0))]
    pub timeout_seconds: i32,
}

/// A machine condition that makes the machine unhealthy once held for `timeoutSeconds`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyMachineCondition {
    /// The machine condition's type (not one the health check itself sets).
    #[serde(rename = "type")]
    #[schemars(
        length(min = 1, max = 316),
        pattern(CONDITION_TYPE),
        extend("x-kubernetes-validations" = [{
            "rule": "!(self in ['Ready','Available','HealthCheckSucceeded','OwnerRemediated','ExternallyRemediated'])",
            "message": "type must not be one of: Ready, Available, HealthCheckSucceeded, OwnerRemediated, ExternallyRemediated"
        }])
    )]
    pub kind: String,
    /// Its status.
    pub status: ConditionStatus,
    /// How long it must hold.
    #[schemars(range(min = 0))]
    pub timeout_seconds: i32,
}

/// A condition's status.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    /// It holds.
    True,
    /// It does not hold.
    False,
    /// Not known.
    Unknown,
}

/// When and how a health check's unhealthy machines are remediated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineHealthCheckRemediation {
    /// Remediation happens only while this holds (short-circuit when too many are unhealthy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_if: Option<MachineHealthCheckRemediationTriggerIf>,
    /// An external remediation template; unset, the machine's owner replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_ref: Option<MachineHealthCheckRemediationTemplateReference>,
}

/// When remediation is allowed, by the number of unhealthy machines.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineHealthCheckRemediationTriggerIf {
    /// At most this many (a count or a percentage of the checked machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_less_than_or_equal_to: Option<IntOrString>,
    /// Within this range, `[min-max]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), pattern(r"^\[[0-9]+-[0-9]+\]$"))]
    pub unhealthy_in_range: Option<String>,
}

/// An external remediation template, by API version, kind and name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckRemediationTemplateReference {
    /// The template's kind.
    #[schemars(length(min = 1, max = 63), pattern(KIND))]
    pub kind: String,
    /// The template's name.
    #[schemars(length(min = 1, max = 253), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// The template's `group/version`.
    #[schemars(
        length(min = 1, max = 317),
        pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub api_version: String,
}

/// What the machine health check controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachineHealthCheckStatus {
    /// `RemediationAllowed`, `Paused`, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// How many machines are checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub expected_machines: Option<i32>,
    /// How many of them are healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub current_healthy: Option<i32>,
    /// How many more may be remediated before the short-circuit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub remediations_allowed: Option<i32>,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    /// The names of the checked machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10000), inner(length(min = 1, max = 253)), extend("x-kubernetes-list-type" = "atomic"))]
    pub targets: Vec<String>,
    /// What v1beta1 clients read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<MachineHealthCheckDeprecatedStatus>,
}

/// A machine health check's status as v1beta1 clients read it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineHealthCheckDeprecatedStatus {
    /// The v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<MachineHealthCheckV1Beta1DeprecatedStatus>,
}

/// The v1beta1 fields of a machine health check's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineHealthCheckV1Beta1DeprecatedStatus {
    /// Conditions in v1beta1's shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
}
