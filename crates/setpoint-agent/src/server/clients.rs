//! Who may call the agent's endpoint. The TLS handshake already requires a client certificate
//! from the cluster CA; but that CA also signs users' certificates (`setpoint kubeconfig user`,
//! CertificateSigningRequests), and a user who may only `get pods` must not reach a pod's
//! shell by calling the agent directly. So the certificate must also name the group
//! `system:masters`, as the API server's does (kube's kubelet asks the API server to authorize
//! each caller; the API server is the only caller the agent serves, and RBAC has already
//! authorized the request it forwards). Everyone else gets 403 on every request.

use rustls::pki_types::CertificateDer;

/// The group a caller's certificate must name.
pub(crate) const CALLER_GROUP: &str = "system:masters";

/// Why a connection whose client presented `certificates` is refused, or `None` if it may
/// call.
pub(crate) fn refusal(certificates: Option<&[CertificateDer<'_>]>) -> Option<String> {
    let Some(leaf) = certificates.and_then(<[CertificateDer<'_>]>::first) else {
        return Some("no client certificate".to_owned());
    };
    let Ok((_, certificate)) = x509_parser::parse_x509_certificate(leaf.as_ref()) else {
        return Some("the client certificate cannot be read".to_owned());
    };
    let subject = certificate.subject();
    let in_group = subject
        .iter_organization()
        .any(|o| o.as_str().is_ok_and(|o| o == CALLER_GROUP));
    if in_group {
        return None;
    }
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or("")
        .to_owned();
    Some(format!(
        "user {user:?} may not call the node agent: it serves the API server only (a client \
         certificate in the group {CALLER_GROUP:?}); go through the API server"
    ))
}
