//! Resolving an issuer to what signs: an Issuer or ClusterIssuer read from the API, and for a
//! `ca` issuer its CA Secret (the Issuer's namespace, or
//! [`CLUSTER_RESOURCE_NAMESPACE`] for a ClusterIssuer), checked to hold a CA certificate and
//! its key. Shared by the issuers' loop (which reports it as `Ready`) and the Certificates'
//! loop (which signs with it).

use k8s_openapi::api::core::v1::Secret;
use setpoint_runtime::Client;

use super::certificate::IssuerReference;
use super::issuer::{ClusterIssuer, Issuer, IssuerConfig};
use super::pki::{CaKeyPair, Signer};
use super::CLUSTER_RESOURCE_NAMESPACE;

/// Why an issuer cannot sign, with cert-manager's condition reason.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignerError {
    /// The issuer does not exist (or could not be read).
    #[error("{kind} {name:?} cannot be read: {source}")]
    NotFound {
        /// `Issuer` or `ClusterIssuer`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The issuer names no type Setpoint supports.
    #[error("the issuer is neither selfSigned nor ca (the types Setpoint supports)")]
    Unsupported,
    /// The CA Secret cannot be read.
    #[error("error getting keypair for CA issuer: Secret {namespace}/{name}: {source}")]
    GetKeyPair {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The CA Secret does not hold a usable CA.
    #[error("error getting keypair for CA issuer: Secret {namespace}/{name}: {message}")]
    InvalidKeyPair {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What is wrong with it.
        message: String,
    },
}

impl SignerError {
    /// cert-manager's reason for an issuer's `Ready=False`.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            SignerError::NotFound { .. } => "NotFound",
            SignerError::Unsupported => "InvalidConfig",
            SignerError::GetKeyPair { .. } => "ErrGetKeyPair",
            SignerError::InvalidKeyPair { .. } => "ErrInvalidKeyPair",
        }
    }
}

/// The signer of an issuer of `config` whose CA Secret (if any) lives in `namespace`.
pub(crate) async fn signer_of(
    client: &Client,
    config: &IssuerConfig,
    namespace: &str,
) -> Result<Signer, SignerError> {
    if config.self_signed.is_some() {
        return Ok(Signer::SelfSigned);
    }
    let Some(ca) = &config.ca else {
        return Err(SignerError::Unsupported);
    };
    let secret = client
        .namespaced_api::<Secret>(namespace)
        .get(&ca.secret_name)
        .await
        .map_err(|source| SignerError::GetKeyPair {
            namespace: namespace.to_owned(),
            name: ca.secret_name.clone(),
            source,
        })?;
    let text = |key: &str| secret_text(&secret, key);
    CaKeyPair::from_pem(&text("tls.crt"), &text("tls.key"), &text("ca.crt"))
        .map(|ca| Signer::Ca(Box::new(ca)))
        .map_err(|e| SignerError::InvalidKeyPair {
            namespace: namespace.to_owned(),
            name: ca.secret_name.clone(),
            message: e.to_string(),
        })
}

/// The signer a Certificate in `namespace` referring to `issuer` gets.
pub(crate) async fn resolve(
    client: &Client,
    namespace: &str,
    issuer: &IssuerReference,
) -> Result<Signer, SignerError> {
    if issuer.is_cluster() {
        let found = client
            .api::<ClusterIssuer>()
            .get(&issuer.name)
            .await
            .map_err(|source| SignerError::NotFound {
                kind: "ClusterIssuer",
                name: issuer.name.clone(),
                source,
            })?;
        signer_of(client, &found.spec.config, CLUSTER_RESOURCE_NAMESPACE).await
    } else {
        let found = client
            .namespaced_api::<Issuer>(namespace)
            .get(&issuer.name)
            .await
            .map_err(|source| SignerError::NotFound {
                kind: "Issuer",
                name: issuer.name.clone(),
                source,
            })?;
        signer_of(client, &found.spec.config, namespace).await
    }
}

/// A Secret's value under `key` as text (empty when absent).
pub(crate) fn secret_text(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}
