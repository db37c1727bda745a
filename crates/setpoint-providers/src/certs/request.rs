//! The `CertificateRequest` kind (`cert-manager.io/v1`): the audit trail of issuance. The
//! Certificate loop makes one per issuance, named `<certificate>-<revision>`, controlled by
//! the Certificate and annotated with `cert-manager.io/certificate-revision`; it holds the CSR
//! that was signed and, in status, the certificate and CA that came back. The oldest are
//! deleted beyond the Certificate's `revisionHistoryLimit`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::ByteString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::certificate::IssuerReference;

/// One request to sign a certificate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "CertificateRequest",
    namespaced,
    status = "CertificateRequestStatus",
    shortname = "cr",
    shortname = "crs",
    printcolumn = r#"{"name":"Approved","type":"string","jsonPath":".status.conditions[?(@.type==\"Approved\")].status"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRequestSpec {
    /// The PEM-encoded certificate signing request (base64 in JSON, as a byte field).
    #[schemars(with = "String")]
    pub request: ByteString,
    /// The issuer asked to sign it.
    pub issuer_ref: IssuerReference,
    /// The requested lifetime, a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Whether a CA certificate was requested.
    #[serde(default, rename = "isCA", skip_serializing_if = "Option::is_none")]
    pub is_ca: Option<bool>,
    /// The requested usages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usages: Option<Vec<String>>,
}

/// The outcome of a request.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRequestStatus {
    /// `Approved` and `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The signed certificate, PEM (with its chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub certificate: Option<ByteString>,
    /// The CA certificate, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub ca: Option<ByteString>,
}
