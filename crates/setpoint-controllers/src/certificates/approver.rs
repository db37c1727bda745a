//! The approving loop (kube-controller-manager's `csrapproving`): a node agent's client
//! certificate request (signer `kubernetes.io/kube-apiserver-client-kubelet`, `CN=system:node:…`,
//! `O=system:nodes`, client usages, no SANs) is approved when its requester may `create` the
//! `certificatesigningrequests/selfnodeclient` subresource (renewing its own certificate: the
//! requester is the CN) or `certificatesigningrequests/nodeclient` (a bootstrap token asking
//! for a new node), asked through a SubjectAccessReview for the user recorded in the request's
//! spec. Anything else is left for a person (`kubectl certificate approve`).

use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::PostParams;
use setpoint_runtime::{Action, Client, Controller, ControllerError};
use tokio_util::sync::CancellationToken;

use super::{has_condition, new_condition, request, signer, CertificateError};
use crate::LoopContext;

/// Runs the approving loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    Controller::<CertificateSigningRequest>::new(&ctx.factory)
        .named("csrapproving")
        .registered_in(&ctx.metrics)
        .concurrency(2)
        .run(approve, Arc::new(ctx.client), shutdown.cancelled_owned())
        .await
}

/// Which subresource `create` permission approves `csr`, if it is a node client request:
/// `selfnodeclient` when the requester is the node itself, else `nodeclient`.
pub(crate) fn node_client_permission(csr: &CertificateSigningRequest) -> Option<&'static str> {
    if csr.spec.signer_name != signer::KUBELET_CLIENT {
        return None;
    }
    let request = request::parse(&csr.spec.request.0).ok()?;
    let usages = csr.spec.usages.clone().unwrap_or_default();
    signer::check(signer::KUBELET_CLIENT, &request, &usages).ok()?;
    if csr.spec.username.as_deref() == Some(request.common_name()) {
        Some("selfnodeclient")
    } else {
        Some("nodeclient")
    }
}

async fn approve(
    csr: Arc<CertificateSigningRequest>,
    client: Arc<Client>,
) -> Result<Action, CertificateError> {
    if has_condition(&csr, "Approved") || has_condition(&csr, "Denied") {
        return Ok(Action::await_change());
    }
    let Some(subresource) = node_client_permission(&csr) else {
        return Ok(Action::await_change());
    };
    let name = csr.metadata.name.clone().unwrap_or_default();
    let fail = |source| CertificateError::Write {
        name: name.clone(),
        source,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: csr.spec.username.clone(),
            uid: csr.spec.uid.clone(),
            groups: csr.spec.groups.clone(),
            extra: csr.spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".to_owned()),
                resource: Some("certificatesigningrequests".to_owned()),
                subresource: Some(subresource.to_owned()),
                verb: Some("create".to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = client
        .api::<SubjectAccessReview>()
        .create(&PostParams::default(), &review)
        .await
        .map_err(fail)?;
    if !answer.status.is_some_and(|s| s.allowed) {
        return Ok(Action::await_change());
    }
    let message = if subresource == "selfnodeclient" {
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    } else {
        "Auto approving kubelet client certificate after SubjectAccessReview."
    };
    let mut next = (*csr).clone();
    next.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(new_condition("Approved", "AutoApproved", message));
    match client
        .api::<CertificateSigningRequest>()
        .replace_subresource("approval", &name, &PostParams::default(), &next)
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(source) => Err(fail(source)),
    }
}
