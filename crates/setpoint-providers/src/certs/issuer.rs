//! The `Issuer` (namespaced) and `ClusterIssuer` (cluster-scoped) kinds of
//! `cert-manager.io/v1`: who signs a Certificate. Setpoint supports cert-manager's two
//! in-cluster issuer types: `selfSigned` (each certificate signed by its own key) and `ca`
//! (signed by the key pair in a Secret: the Issuer's namespace, or for a ClusterIssuer the
//! cluster resource namespace, [`CLUSTER_RESOURCE_NAMESPACE`](super::CLUSTER_RESOURCE_NAMESPACE)).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An issuer for the Certificates of its namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Issuer",
    namespaced,
    status = "IssuerStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct IssuerSpec {
    /// What kind of issuer it is.
    #[serde(flatten)]
    pub config: IssuerConfig,
}

/// An issuer for the Certificates of every namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "ClusterIssuer",
    status = "IssuerStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct ClusterIssuerSpec {
    /// What kind of issuer it is.
    #[serde(flatten)]
    pub config: IssuerConfig,
}

/// The issuer types (exactly one is set).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuerConfig {
    /// Certificates are signed by their own private key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_signed: Option<SelfSignedIssuer>,
    /// Certificates are signed by a CA key pair held in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaIssuer>,
}

/// A self-signing issuer (no settings Setpoint uses).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelfSignedIssuer {
    /// CRL distribution points (accepted, not written into certificates by Setpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crl_distribution_points: Option<Vec<String>>,
}

/// A CA issuer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaIssuer {
    /// The Secret (`tls.crt`, `tls.key`, a PKCS#8 key) holding the CA's key pair.
    pub secret_name: String,
}

/// An issuer's readiness.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuerStatus {
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// What the two issuer kinds share, for the code that reads either.
pub(crate) trait IssuerObject {
    /// The issuer's configuration.
    fn config(&self) -> &IssuerConfig;
    /// Its conditions.
    fn conditions(&self) -> &[Condition];
}

impl IssuerObject for Issuer {
    fn config(&self) -> &IssuerConfig {
        &self.spec.config
    }
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
    }
}

impl IssuerObject for ClusterIssuer {
    fn config(&self) -> &IssuerConfig {
        &self.spec.config
    }
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
    }
}
