//! `serviceAccountName`: the client a Sync applies with, impersonating
//! `system:serviceaccount:<namespace>:<name>` so RBAC limits what its source may change (the
//! API server adds the ServiceAccount's groups, as kube-apiserver does).
//!
//! Impersonation travels as `Impersonate-User` headers, which the API server authorizes with
//! the `impersonate` verb — over HTTPS and in-process alike (`Api::handle_as` honours them as
//! the network transport does), so what the ServiceAccount may not do is refused, never
//! applied with the loop's wider rights.

use http::HeaderValue;
use kube::client::Body;
use setpoint_runtime::Client;

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImpersonationError {
    /// The user name is not a valid header value.
    #[error("serviceAccountName {0:?} is not a valid name")]
    InvalidName(String),
}

/// The client to apply with: the loop's own, or one impersonating the ServiceAccount.
pub(crate) fn client_for(
    base: &Client,
    namespace: &str,
    service_account: Option<&str>,
) -> Result<kube::Client, ImpersonationError> {
    let Some(account) = service_account.filter(|a| !a.is_empty()) else {
        return Ok(base.kube().clone());
    };
    let user = format!("system:serviceaccount:{namespace}:{account}");
    let header = HeaderValue::from_str(&user)
        .map_err(|_| ImpersonationError::InvalidName(account.to_owned()))?;
    let inner = base.kube().clone();
    let service = tower::service_fn(move |mut request: http::Request<Body>| {
        let inner = inner.clone();
        request
            .headers_mut()
            .insert("Impersonate-User", header.clone());
        async move { inner.send(request).await }
    });
    Ok(kube::Client::new(service, namespace.to_owned()))
}
