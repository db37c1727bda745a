//! The certificate loops (kube-controller-manager's `certificate-controller`, whose ServiceAccount identity
//! they write with): `csrsigning`
//! signs approved CertificateSigningRequests of the built-in signers ([`signer`]) with the
//! cluster CA, `csrapproving` approves node agents' client certificate requests
//! ([`approver`]), and `csrcleaner` deletes old requests ([`cleaner`]). docs/design/certificates.md
//! tells the whole flow.

mod approver;
mod cleaner;
mod request;
mod signer;
mod x509;

use std::sync::Arc;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use setpoint_runtime::{Action, Client, Controller, ControllerError};
use tokio_util::sync::CancellationToken;

pub use signer::{issue_client_certificate, IssueError, SigningCa};

pub(crate) use approver::run as run_approver;
pub(crate) use cleaner::run as run_cleaner;

use crate::LoopContext;

/// Why a certificate loop's sync failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CertificateError {
    /// A write to the API failed.
    #[error("updating CertificateSigningRequest {name}")]
    Write {
        /// The request's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Whether `csr` has a condition of `kind` with status `True` (or no status, the default).
pub(crate) fn has_condition(csr: &CertificateSigningRequest, kind: &str) -> bool {
    condition(csr, kind).is_some()
}

/// The condition of `kind` with status `True`.
pub(crate) fn condition<'a>(
    csr: &'a CertificateSigningRequest,
    kind: &str,
) -> Option<&'a CertificateSigningRequestCondition> {
    csr.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == kind && (c.status.is_empty() || c.status == "True"))
}

/// A `True` condition of `kind` stamped `now`.
pub(crate) fn new_condition(
    kind: &str,
    reason: &str,
    message: &str,
) -> CertificateSigningRequestCondition {
    let now = Time(Timestamp::now());
    CertificateSigningRequestCondition {
        type_: kind.to_owned(),
        status: "True".to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}

/// What the signing loop needs.
struct Signing {
    client: Client,
    ca: SigningCa,
    duration: std::time::Duration,
}

/// Runs the signing loop until `shutdown` is cancelled; without a signing CA it signs nothing
/// (and says so once).
pub(crate) async fn run_signer(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let Some(ca) = ctx.settings.signing_ca.clone() else {
        tracing::warn!(
            "csrsigning: no signing CA (--cluster-signing-cert-file/--cluster-signing-key-file); CertificateSigningRequests are not signed"
        );
        shutdown.cancelled().await;
        return Ok(());
    };
    let signing = Signing {
        client: ctx.client,
        ca,
        duration: ctx.settings.cluster_signing_duration,
    };
    Controller::<CertificateSigningRequest>::new(&ctx.factory)
        .named("csrsigning")
        .registered_in(&ctx.metrics)
        .concurrency(2)
        .run(sign, Arc::new(signing), shutdown.cancelled_owned())
        .await
}

async fn sign(
    csr: Arc<CertificateSigningRequest>,
    ctx: Arc<Signing>,
) -> Result<Action, CertificateError> {
    let issued = csr
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty());
    if issued
        || !has_condition(&csr, "Approved")
        || has_condition(&csr, "Denied")
        || has_condition(&csr, "Failed")
    {
        return Ok(Action::await_change());
    }
    let signer_name = csr.spec.signer_name.as_str();
    let outcome = if signer::is_builtin(signer_name) {
        request::parse(&csr.spec.request.0)
            .map_err(|e| signer::Refusal::Invalid(e.to_string()))
            .and_then(|request| {
                let usages = csr.spec.usages.clone().unwrap_or_default();
                signer::check(signer_name, &request, &usages)?;
                let mut duration = ctx.duration;
                if let Some(seconds) = csr.spec.expiration_seconds {
                    let asked = std::time::Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
                    duration = duration.min(asked);
                }
                signer::sign(
                    &ctx.ca,
                    &request,
                    &usages,
                    duration,
                    time::OffsetDateTime::now_utc(),
                )
            })
    } else if signer_name.starts_with("kubernetes.io/") {
        Err(signer::Refusal::Invalid(format!(
            "unrecognized signerName: {signer_name:?}"
        )))
    } else {
        // Another signer's request: left to it.
        return Ok(Action::await_change());
    };
    let mut next = (*csr).clone();
    let status = next.status.get_or_insert_with(Default::default);
    match outcome {
        Ok(pem) => status.certificate = Some(ByteString(pem.into_bytes())),
        Err(refusal) => {
            let reason = match refusal {
                signer::Refusal::Invalid(_) => "SignerValidationFailure",
                signer::Refusal::Signing(_) => "SigningFailure",
            };
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(new_condition("Failed", reason, &refusal.to_string()));
        }
    }
    let name = csr.metadata.name.clone().unwrap_or_default();
    match ctx
        .client
        .api::<CertificateSigningRequest>()
        .replace_status(&name, &PostParams::default(), &next)
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(source) => Err(CertificateError::Write { name, source }),
    }
}

#[cfg(test)]
mod tests;
