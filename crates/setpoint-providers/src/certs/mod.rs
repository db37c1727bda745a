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
mod external;
mod inspect;
mod issuer;
mod issuers;
mod keys;
mod output;
mod pki;
#[cfg(test)]
mod pki_tests;
mod request;
mod signer;
mod timing;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{CustomResourceExt as _, ResourceExt as _};
use setpoint_runtime::managed::{ManagedOptions, ManagedReconciler};
use setpoint_runtime::{
    install_crd, Controller, ControllerError, EventRecorder, ObjectKey, Reporter,
};
use tokio_util::sync::CancellationToken;

use crate::ProviderContext;
use external::CertificateConnector;

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

/// The loop's name: its field manager, and the prefix of its controllers' names.
const NAME: &str = "cert-manager";
/// How many Certificates are reconciled at once.
const CONCURRENCY: usize = 8;
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// Installs the CRDs, then runs this provider's loops (issuers, Certificates) until
/// `shutdown` is cancelled. A CRD that cannot be installed is logged and nothing runs.
pub async fn run(ctx: ProviderContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    for crd in [
        Issuer::crd(),
        ClusterIssuer::crd(),
        Certificate::crd(),
        CertificateRequest::crd(),
    ] {
        if let Err(e) = install_crd(&ctx.client, &crd, CRD_TIMEOUT).await {
            tracing::error!(crd = crd.name_any(), error = %e, "installing a CRD; the certificate loops do not run");
            shutdown.cancelled().await;
            return Ok(());
        }
    }
    let issuers = issuers::run(&ctx, shutdown.clone());
    let connector = CertificateConnector {
        client: ctx.client.clone(),
        clock: ctx.clock.clone(),
    };
    let mut options = ManagedOptions::new(NAME);
    options.poll_interval = ctx.settings.poll_interval;
    let certificates_of_issuers = ctx.factory.informer::<Certificate>().store();
    let certificates_of_cluster_issuers = certificates_of_issuers.clone();
    let certificates = Controller::<Certificate>::new(&ctx.factory)
        .named("cert-manager-certificates")
        .registered_in(&ctx.metrics)
        .concurrency(CONCURRENCY)
        .predicate(setpoint_runtime::managed::changes())
        // A Secret deleted or edited behind the loop's back re-issues at once.
        .watches::<Secret, _>(|secret: &Secret| {
            secret
                .annotations()
                .get(output::CERTIFICATE_NAME)
                .zip(secret.namespace())
                .map(|(name, namespace)| ObjectKey::namespaced(namespace, name.clone()))
        })
        // A Certificate waiting for its issuer is issued as soon as the issuer changes.
        .watches::<Issuer, _>(move |issuer: &Issuer| {
            let namespace = issuer.namespace().unwrap_or_default();
            let name = issuer.name_any();
            by_issuer(certificates_of_issuers.list_namespace(&namespace), |r| {
                !r.is_cluster() && r.name == name
            })
        })
        .watches::<ClusterIssuer, _>(move |issuer: &ClusterIssuer| {
            let name = issuer.name_any();
            by_issuer(certificates_of_cluster_issuers.list(), |r| {
                r.is_cluster() && r.name == name
            })
        })
        .run(
            ManagedReconciler::new(ctx.client.clone(), connector, options).with_events(
                EventRecorder::new(ctx.client.clone(), Reporter::new(NAME, NAME)),
            ),
            Arc::new(()),
            shutdown.cancelled_owned(),
        );
    let (a, b) = tokio::join!(issuers, certificates);
    a.and(b)
}

/// The keys of the `certificates` whose issuer reference `names` accepts.
fn by_issuer(
    certificates: Vec<Arc<Certificate>>,
    names: impl Fn(&IssuerReference) -> bool,
) -> Vec<ObjectKey> {
    certificates
        .iter()
        .filter(|c| names(&c.spec.issuer_ref))
        .map(|c| ObjectKey::of(c.as_ref()))
        .collect()
}
