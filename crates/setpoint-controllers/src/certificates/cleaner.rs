//! The cleaning loop (kube-controller-manager's `csrcleaner`): deletes a request an hour after
//! it was approved and issued, denied or failed (from its condition's `lastUpdateTime`), a
//! day after it was created while still pending, and at once when its issued certificate
//! has expired. Each request is requeued for its deadline; the delete carries its uid.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, Preconditions};
use setpoint_runtime::{Action, Client, Controller, ControllerError};
use tokio_util::sync::CancellationToken;

use super::{condition, CertificateError};
use crate::LoopContext;

/// How long an issued, denied or failed request is kept.
const FINISHED_TTL: SignedDuration = SignedDuration::from_hours(1);
/// How long a pending request is kept.
const PENDING_TTL: SignedDuration = SignedDuration::from_hours(24);

/// Runs the cleaning loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    Controller::<CertificateSigningRequest>::new(&ctx.factory)
        .named("csrcleaner")
        .registered_in(&ctx.metrics)
        .concurrency(1)
        .run(clean, Arc::new(ctx.client), shutdown.cancelled_owned())
        .await
}

/// When `csr` is to be deleted (`None`: not while it stays as it is).
pub(crate) fn deadline(csr: &CertificateSigningRequest) -> Option<Timestamp> {
    let certificate = csr
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .filter(|c| !c.0.is_empty());
    let mut deadlines = Vec::new();
    let updated = |kind: &str| {
        condition(csr, kind)
            .and_then(|c| {
                c.last_update_time
                    .as_ref()
                    .or(c.last_transition_time.as_ref())
            })
            .and_then(|t| t.0.checked_add(FINISHED_TTL).ok())
    };
    if certificate.is_some() {
        deadlines.extend(updated("Approved"));
    }
    deadlines.extend(updated("Denied"));
    deadlines.extend(updated("Failed"));
    if let Some(expiry) = certificate.and_then(|c| certificate_expiry(&c.0)) {
        deadlines.push(expiry);
    }
    let pending = ["Approved", "Denied", "Failed"]
        .iter()
        .all(|k| condition(csr, k).is_none());
    if pending {
        deadlines.extend(
            csr.metadata
                .creation_timestamp
                .as_ref()
                .and_then(|t| t.0.checked_add(PENDING_TTL).ok()),
        );
    }
    deadlines.into_iter().min()
}

/// The `notAfter` of the first certificate of a PEM bundle.
fn certificate_expiry(pem: &[u8]) -> Option<Timestamp> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let cert = block.parse_x509().ok()?;
    Timestamp::from_second(cert.validity().not_after.timestamp()).ok()
}

async fn clean(
    csr: Arc<CertificateSigningRequest>,
    client: Arc<Client>,
) -> Result<Action, CertificateError> {
    let Some(at) = deadline(&csr) else {
        return Ok(Action::await_change());
    };
    let now = Timestamp::now();
    if at > now {
        let wait = Duration::try_from(at.duration_since(now)).unwrap_or_default();
        return Ok(Action::requeue(wait));
    }
    let name = csr.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: csr.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match client
        .api::<CertificateSigningRequest>()
        .delete(&name, &params)
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Action::await_change()),
        Err(source) => Err(CertificateError::Write { name, source }),
    }
}
