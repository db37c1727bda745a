//! Types the five kinds share, as upstream's `common_types.go` and `condition_types.go` define
//! them: references to provider objects, machine addresses and taints, template metadata, the
//! version counts in status, and the v1beta1 condition kept under `status.deprecated.v1beta1`.
//!
//! Validation is what a structural schema can say (lengths, patterns, ranges, enums, required
//! fields); it is checked by the API server when an object is written, not by these types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A DNS-1123 subdomain (object names, API groups).
pub(crate) const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A kind name.
pub(crate) const KIND: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";
/// A condition type, optionally prefixed by a DNS subdomain (`example.com/Ready`).
pub(crate) const CONDITION_TYPE: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// A reference to a provider's object (infrastructure, bootstrap config, control plane) by API
/// group, kind and name, in the referrer's namespace. The version is not part of it: it is
/// read from the CRD's contract label (`cluster.x-k8s.io/<contract>`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractVersionedObjectReference {
    /// The kind (`DockerMachine`, `KubeadmConfig`, …).
    #[schemars(length(min = 1, max = 63), pattern(KIND))]
    pub kind: String,
    /// The object's name.
    #[schemars(length(min = 1, max = 253), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// The API group (`infrastructure.cluster.x-k8s.io`).
    #[schemars(length(min = 1, max = 253), pattern(DNS1123_SUBDOMAIN))]
    pub api_group: String,
}

/// The kind of a machine address.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineAddressType {
    /// The machine's host name.
    Hostname,
    /// An address reachable from outside the cluster.
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    /// An address reachable only inside the cluster.
    #[serde(rename = "InternalIP")]
    InternalIp,
    /// A DNS name reachable from outside the cluster.
    #[serde(rename = "ExternalDNS")]
    ExternalDns,
    /// A DNS name reachable only inside the cluster.
    #[serde(rename = "InternalDNS")]
    InternalDns,
}

/// One address of a machine, as its infrastructure reports it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    /// What kind of address.
    #[serde(rename = "type")]
    pub kind: MachineAddressType,
    /// The address.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// Labels and annotations of a template (a subset of `ObjectMeta`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct ObjectMeta {
    /// Labels given to the objects made from the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations given to the objects made from the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The effect of a taint on pods.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TaintEffect {
    /// New pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate it.
    PreferNoSchedule,
    /// Pods that do not tolerate it are evicted.
    NoExecute,
}

/// When a machine's taint is put on its node.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineTaintPropagation {
    /// Kept on the node as long as it is on the machine.
    Always,
    /// Put on the node once, when it is initialised.
    OnInitialization,
}

/// A taint a machine puts on its node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineTaint {
    /// The taint's key.
    #[schemars(
        length(min = 1, max = 317),
        pattern(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
    )]
    pub key: String,
    /// The taint's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 63),
        pattern(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
    )]
    pub value: Option<String>,
    /// Its effect on pods.
    pub effect: TaintEffect,
    /// When it is put on the node.
    pub propagation: MachineTaintPropagation,
}

/// Whether a condition is good when `True` (positive) or when `False` (negative).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionPolarity {
    /// `True` is good.
    Positive,
    /// `False` is good.
    Negative,
}

/// How many machines run one version (`status.versions`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct StatusVersion {
    /// The Kubernetes version.
    #[schemars(length(min = 1, max = 256))]
    pub version: String,
    /// How many machines run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub replicas: Option<i32>,
}

/// One step of an upgrade plan (`status.controlPlane.upgradePlan`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct StatusUpgradePlanVersion {
    /// The Kubernetes version of this step.
    #[schemars(length(min = 1, max = 256))]
    pub version: String,
}

/// A condition in v1beta1's shape (with a severity), kept in `status.deprecated.v1beta1` for
/// clients that still read it; v1beta2's conditions are `metav1.Condition`s.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1Condition {
    /// The condition's type.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 256))]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `Error`, `Warning` or `Info` when the status is `False`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub severity: Option<String>,
    /// When the status last changed.
    pub last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    /// Why, in one CamelCase word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub reason: Option<String>,
    /// Why, for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10240))]
    pub message: Option<String>,
}
