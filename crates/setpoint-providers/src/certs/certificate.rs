//! The `Certificate` kind (`cert-manager.io/v1`): a desired X.509 certificate and where its
//! key pair goes. Field names are cert-manager's for every feature Setpoint shares, so a
//! Certificate written for cert-manager reads the same here; Setpoint's one addition is
//! `spec.directory` (files written on this machine). A Certificate is a managed object
//! ([`Managed`]): its external object is the Secret `spec.secretName` plus those files.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use setpoint_runtime::managed::{Managed, ResourceSpec};

/// A certificate to issue and keep renewed.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Certificate",
    namespaced,
    status = "CertificateStatus",
    shortname = "cert",
    shortname = "certs",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Secret","type":"string","jsonPath":".spec.secretName"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSpec {
    /// The Secret the key pair and chain are written to (`tls.crt`, `tls.key`, `ca.crt`).
    pub secret_name: String,
    /// The issuer that signs it.
    pub issuer_ref: IssuerReference,
    /// The subject's common name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_name: Option<String>,
    /// Further subject fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<X509Subject>,
    /// DNS subject alternative names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_names: Option<Vec<String>>,
    /// IP address subject alternative names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<Vec<String>>,
    /// URI subject alternative names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uris: Option<Vec<String>>,
    /// Email subject alternative names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_addresses: Option<Vec<String>>,
    /// The requested lifetime, a Go duration (`2160h`, the default: 90 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// How long before expiry it is renewed, a Go duration (default: ⅓ of the lifetime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
    /// How long before expiry it is renewed, as a percentage of the lifetime (used when
    /// `renewBefore` is not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before_percentage: Option<i32>,
    /// Whether it is a certificate authority (may sign certificates).
    #[serde(default, rename = "isCA", skip_serializing_if = "Option::is_none")]
    pub is_ca: Option<bool>,
    /// Key usages and extended key usages, by cert-manager's names (`digital signature`,
    /// `key encipherment`, `server auth`, `client auth`, …); default `digital signature` and
    /// `key encipherment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usages: Option<Vec<String>>,
    /// The private key's algorithm, size, encoding and rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<CertificatePrivateKey>,
    /// Labels and annotations copied onto the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_template: Option<SecretTemplate>,
    /// How many CertificateRequests (one per issuance) are kept; all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Setpoint's addition: an absolute directory on the machine running the controller where
    /// `tls.crt`, `tls.key` (mode 0600) and `ca.crt` are also written and kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    /// The managed-resource fields (`deletionPolicy`: `Delete`, the default, removes the
    /// Secret and the files with the Certificate; `Orphan` leaves them, as cert-manager does).
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

/// Which issuer signs a certificate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct IssuerReference {
    /// The issuer's name.
    pub name: String,
    /// `Issuer` (the default: in the Certificate's namespace) or `ClusterIssuer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The issuer's API group (`cert-manager.io`, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl IssuerReference {
    /// Whether it names a `ClusterIssuer`.
    pub fn is_cluster(&self) -> bool {
        self.kind.as_deref() == Some("ClusterIssuer")
    }

    /// The kind, defaulted.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Issuer")
    }

    /// The group, defaulted.
    pub fn group(&self) -> &str {
        self.group
            .as_deref()
            .filter(|g| !g.is_empty())
            .unwrap_or(super::GROUP)
    }
}

/// Subject fields beyond the common name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct X509Subject {
    /// `O`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizations: Vec<String>,
    /// `C`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    /// `OU`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizational_units: Vec<String>,
    /// `L`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub localities: Vec<String>,
    /// `ST`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provinces: Vec<String>,
    /// `street`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub street_addresses: Vec<String>,
    /// `postalCode`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub postal_codes: Vec<String>,
    /// `serialNumber` (of the subject, not the certificate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
}

/// The private key's settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificatePrivateKey {
    /// `RSA`, `ECDSA` or `Ed25519` (Setpoint's default is `ECDSA`, cert-manager's `RSA`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<KeyAlgorithm>,
    /// The key size: 256 (default) or 384 for ECDSA; 2048 (default) to 8192 bits for RSA;
    /// ignored for Ed25519.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    /// `Always` (the default, as in cert-manager ≥ 1.18): a new key on every issuance;
    /// `Never`: the Secret's key is reused while it matches the algorithm and size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation_policy: Option<RotationPolicy>,
    /// `PKCS1` (the default) or `PKCS8`: how an RSA key is written. ECDSA and Ed25519 keys are
    /// written PKCS#8 either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<KeyEncoding>,
}

/// A private key algorithm.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum KeyAlgorithm {
    /// RSA.
    #[serde(rename = "RSA")]
    Rsa,
    /// ECDSA on P-256 or P-384.
    #[serde(rename = "ECDSA")]
    Ecdsa,
    /// Ed25519.
    Ed25519,
}

/// When the private key is replaced.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RotationPolicy {
    /// Reuse the existing key.
    Never,
    /// A new key on every issuance.
    Always,
}

/// How the private key is encoded.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum KeyEncoding {
    /// PKCS#1 (RSA only).
    #[serde(rename = "PKCS1")]
    Pkcs1,
    /// PKCS#8.
    #[serde(rename = "PKCS8")]
    Pkcs8,
}

/// Labels and annotations for the Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretTemplate {
    /// Copied onto the Secret's annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Copied onto the Secret's labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// What was issued, and the loop's conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateStatus {
    /// `Ready` and `Synced` (the managed-resource loop's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// When the issued certificate becomes valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Time>,
    /// When it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Time>,
    /// When it will be renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal_time: Option<Time>,
    /// How many times it was issued (the revision of the current CertificateRequest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i32>,
    /// When issuing last failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_time: Option<Time>,
    /// The generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Managed for Certificate {
    fn resource_spec(&self) -> Option<&ResourceSpec> {
        Some(&self.spec.resource)
    }

    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    /// Only Certificates of cert-manager's own issuer kinds: one naming an external issuer
    /// (another group) is left to that issuer's controller.
    fn wants_external(&self) -> bool {
        self.spec.issuer_ref.group() == super::GROUP
            && matches!(self.spec.issuer_ref.kind(), "Issuer" | "ClusterIssuer")
    }
}

impl Certificate {
    /// The current revision (0 before the first issuance).
    pub fn revision(&self) -> i32 {
        self.status.as_ref().and_then(|s| s.revision).unwrap_or(0)
    }
}
