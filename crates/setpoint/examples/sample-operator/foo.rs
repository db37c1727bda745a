//! The `Foo` custom resource (`samplecontroller.setpoint.dev/v1alpha1`), defined as Rust types:
//! kube's `CustomResource` derive makes the `Foo` object type and its CRD (`Foo::crd()`), with
//! an OpenAPI schema generated from these structs by `schemars`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a Foo asks for: a Deployment named `deploymentName` running `replicas` pods.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "samplecontroller.setpoint.dev",
    version = "v1alpha1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
    shortname = "foo",
    printcolumn = r#"{"name":"Deployment","type":"string","jsonPath":".spec.deploymentName"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FooSpec {
    /// The name of the Deployment this Foo creates and owns (in the Foo's namespace).
    pub(crate) deployment_name: String,
    /// How many pods the Deployment runs (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub(crate) replicas: Option<i32>,
}

/// What the operator observed, written through the status subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FooStatus {
    /// The Deployment's `status.availableReplicas`.
    #[serde(default)]
    pub(crate) available_replicas: i32,
    /// `Ready` (the Deployment exists, is ours and has every replica available).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<FooCondition>,
}

/// One condition of a Foo (metav1.Condition's shape).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FooCondition {
    /// The condition's type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub(crate) type_: String,
    /// `True`, `False` or `Unknown`.
    pub(crate) status: String,
    /// A CamelCase reason for the last transition.
    pub(crate) reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub(crate) message: String,
    /// When `status` last changed (RFC 3339).
    pub(crate) last_transition_time: String,
}

impl FooSpec {
    /// The replica count asked for (1 when unset).
    pub(crate) fn desired_replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }
}
