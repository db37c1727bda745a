//! One request's way through the transport: the health endpoints are answered at once; other
//! requests (but the [`Handler`]'s public ones: the console's pages) are authenticated (by the
//! [`Handler`], else by the transport's own credentials; 401 if anonymous), refused if they
//! change something on the console's session cookie without its CSRF header or ask to
//! impersonate without the right (403),
//! have their body read up to the limit (413 beyond it, without buffering more than the limit)
//! and are passed to the [`Handler`], whose panics are answered with 500. Reading the body and
//! producing the answer's head must fit in the request timeout (else 504, as kube-apiserver's
//! `--request-timeout`; a client may ask for less with `?timeout=`); a streamed answer (watch, logs) may then go on for as long as it
//! lasts. A request answered before its body was read has the rest of its body drained,
//! within bounds, so the client sees the answer instead of a reset connection.

use std::any::Any;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::FutureExt as _;
use http::header::{AUTHORIZATION, CONNECTION};
use http::{HeaderValue, Request, Response};
use http_body::Body as _;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;

use super::deadline;
use super::handler::{Body, Handler};
use super::health;
use super::request_id::{AuditId, ImpersonatedBy, PeerAddr};
use crate::auth::{self, User};
use crate::pki::BearerToken;
use setpoint_core::ApiError;

use super::failure::failure_response;

/// At most this many bytes of an unwanted request body are drained before the connection is
/// given up.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;
/// At most this long is spent draining an unwanted request body.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// What every request on every connection shares.
pub(crate) struct RequestContext {
    /// The API proper.
    pub(crate) handler: Arc<dyn Handler>,
    /// The admin bearer token.
    pub(crate) admin_token: BearerToken,
    /// The longest request body accepted, in bytes.
    pub(crate) max_body: usize,
    /// How long reading the body and producing the answer's head may take.
    pub(crate) timeout: Duration,
    /// Cancelled when the server starts shutting down (`/readyz` then fails).
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
    /// Where handlers run the connections they take over after `101 Switching Protocols`;
    /// every request carries a clone as an extension.
    pub(crate) upgrades: super::Upgrades,
}

/// Answers `request`, which arrived from `peer` on a connection whose client certificate (if
/// any) stands for `certificate_user`. Every answer carries the request's `Audit-Id`.
pub(crate) async fn serve_request(
    context: Arc<RequestContext>,
    certificate_user: Option<User>,
    peer: SocketAddr,
    mut request: Request<Incoming>,
) -> Response<Body> {
    let audit_id = AuditId::of(request.headers());
    request.extensions_mut().insert(audit_id.clone());
    request.extensions_mut().insert(PeerAddr(peer));
    let mut response = answer(context, certificate_user, request).await;
    audit_id.stamp(&mut response);
    response
}

/// Answers `request` (see [`serve_request`]).
async fn answer(
    context: Arc<RequestContext>,
    certificate_user: Option<User>,
    mut request: Request<Incoming>,
) -> Response<Body> {
    if health::is_health(request.uri()) {
        let response = health::respond(
            request.uri(),
            context.handler.as_ref(),
            context.shutdown.is_cancelled(),
        )
        .await;
        drain_in_background(request.into_body());
        return response;
    }
    if let Some(response) =
        context
            .handler
            .public(request.method(), request.uri(), request.headers())
    {
        drain_in_background(request.into_body());
        return response;
    }
    let user = match context
        .handler
        .authenticate(certificate_user.as_ref(), request.headers())
        .await
    {
        Some(user) => Some(user),
        None => auth::authenticate(
            certificate_user.as_ref(),
            request.headers(),
            &context.admin_token,
        ),
    };
    let Some(user) = user else {
        return answer_refused(&context, request, None, &ApiError::unauthorized());
    };
    if certificate_user.is_none() && auth::console::by_cookie_only(request.headers()) {
        let refusal = if !same_origin(request.uri(), request.headers()) {
            Some(ApiError::forbidden(
                "a request authenticated by the console's session cookie must come from the \
                 console's own origin (its Origin header names another site)",
            ))
        } else if !csrf_safe(request.method(), request.headers()) {
            Some(ApiError::forbidden(format!(
                "a {} request authenticated by the console's session cookie must carry the \
                 header {CSRF_HEADER}: 1",
                request.method()
            )))
        } else {
            None
        };
        if let Some(failure) = refusal {
            return answer_refused(&context, request, Some(&user), &failure);
        }
    }
    let user = match context.handler.impersonate(user.clone(), request.headers()) {
        Ok(acting) if acting == user => acting,
        Ok(acting) => {
            // The audit log records who sent it beside whom it acts as.
            request.extensions_mut().insert(ImpersonatedBy(user));
            acting
        }
        Err(failure) => return answer_refused(&context, request, Some(&user), &failure),
    };
    let version = request.version();
    let timeout = match deadline::request_timeout(request.uri(), context.timeout) {
        Ok(timeout) => timeout,
        Err(failure) => {
            drain_in_background(request.into_body());
            return failure_response(&failure);
        }
    };
    if timeout.is_zero() {
        return read_and_handle(context, user, request).await; // no timeout configured
    }
    match tokio::time::timeout(timeout, read_and_handle(context, user, request)).await {
        Ok(response) => response,
        Err(_elapsed) => {
            tracing::debug!(?timeout, "request timed out");
            let mut response = failure_response(&ApiError::request_timeout());
            if version < http::Version::HTTP_2 {
                // What is left of the body is not read: the connection cannot be reused.
                response
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    }
}

/// The header the web console sends with every request that changes something: a page of
/// another site can make a browser send the session cookie, not this header.
pub(crate) const CSRF_HEADER: &str = "x-setpoint-console";

/// Whether a request may go on as far as cross-site request forgery goes: one authenticated by
/// the console's session cookie alone (no client certificate, no `Authorization`) with an
/// unsafe method must carry [`CSRF_HEADER`]` = 1`.
fn csrf_safe(method: &http::Method, headers: &http::HeaderMap) -> bool {
    let safe = matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    safe || !auth::console::by_cookie_only(headers)
        || headers
            .get(CSRF_HEADER)
            .is_some_and(|v| v.as_bytes() == b"1")
}

/// Whether a request's `Origin` header, if any, is this server's own (`https://` and the
/// request's authority or `Host`): a cookie-authenticated request a page of another site
/// started — a WebSocket to `pods/exec`, say, which cannot carry [`CSRF_HEADER`] — is refused.
fn same_origin(uri: &http::Uri, headers: &http::HeaderMap) -> bool {
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return true;
    };
    let host = uri.authority().map(|a| a.as_str()).or_else(|| {
        headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
    });
    host.is_some_and(|host| {
        origin
            .as_bytes()
            .strip_prefix(b"https://")
            .is_some_and(|rest| rest.eq_ignore_ascii_case(host.as_bytes()))
    })
}

/// Answers `request` with `failure` (its body drained), telling the handler first.
fn answer_refused(
    context: &RequestContext,
    request: Request<Incoming>,
    user: Option<&User>,
    failure: &ApiError,
) -> Response<Body> {
    let (parts, body) = request.into_parts();
    drain_in_background(body);
    context.handler.refused_by_transport(&parts, user, failure);
    failure_response(failure)
}

/// Reads the body of an authenticated request and has the handler answer it; a panic in the
/// handler is answered with 500.
async fn read_and_handle(
    context: Arc<RequestContext>,
    user: User,
    request: Request<Incoming>,
) -> Response<Body> {
    let (mut parts, body) = request.into_parts();
    parts.headers.remove(AUTHORIZATION);
    // hyper's `OnUpgrade` (an HTTP/1.1 upgrade request) stays among the extensions too.
    parts.extensions.insert(context.upgrades.clone());
    let body = match read_body(body, context.max_body).await {
        Ok(body) => body,
        Err(failure) => return failure_response(&failure),
    };
    let (method, path) = (parts.method.clone(), parts.uri.path().to_owned());
    let handled = AssertUnwindSafe(
        context
            .handler
            .handle(Request::from_parts(parts, body), user),
    )
    .catch_unwind()
    .await;
    handled.unwrap_or_else(|panic| {
        tracing::error!(%method, %path, panic = panic_message(&*panic), "request handler panicked");
        failure_response(&ApiError::internal("the request handler panicked"))
    })
}

/// Reads `body` in full if it is at most `limit` bytes long.
async fn read_body(mut body: Incoming, limit: usize) -> Result<Bytes, ApiError> {
    let too_large = ApiError::request_entity_too_large(limit);
    let declared = body.size_hint().lower();
    if usize::try_from(declared).map_or(true, |declared| declared > limit) {
        drain_in_background(body);
        return Err(too_large);
    }
    let mut buffer = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::bad_request(format!("cannot read the request body: {error}"))
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if buffer.len() + data.len() > limit {
            drain_in_background(body);
            return Err(too_large);
        }
        if buffer.is_empty() && body.is_end_stream() {
            return Ok(data); // the whole body in one chunk: no copy
        }
        buffer.extend_from_slice(&data);
    }
    Ok(buffer.freeze())
}

/// Reads and discards the rest of `body` in the background, up to [`DRAIN_LIMIT`] bytes and
/// [`DRAIN_TIME`]; past either the body is dropped and the connection closed.
fn drain_in_background(mut body: Incoming) {
    if body.is_end_stream() {
        return;
    }
    tokio::spawn(async move {
        let drain = async {
            let mut drained = 0_usize;
            while let Some(Ok(frame)) = body.frame().await {
                drained += frame.data_ref().map_or(0, Bytes::len);
                if drained > DRAIN_LIMIT {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
    });
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string panic payload>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn csrf_safe_should_want_the_header_on_unsafe_cookie_requests_only() {
        let cookie = ("cookie", "setpoint-session=abc");
        let post = http::Method::POST;
        assert!(csrf_safe(&http::Method::GET, &headers(&[cookie])));
        assert!(!csrf_safe(&post, &headers(&[cookie])));
        assert!(!csrf_safe(
            &http::Method::DELETE,
            &headers(&[cookie, (CSRF_HEADER, "0")])
        ));
        assert!(csrf_safe(&post, &headers(&[cookie, (CSRF_HEADER, "1")])));
        // Other credentials: a browser cannot be made to send them.
        assert!(csrf_safe(
            &post,
            &headers(&[cookie, ("authorization", "Bearer t")])
        ));
        assert!(csrf_safe(&post, &headers(&[("cookie", "other=1")])));
    }

    #[test]
    fn same_origin_should_accept_no_origin_or_the_servers_own_only() {
        let h2: http::Uri = "https://127.0.0.1:6443/api".parse().unwrap();
        let h1: http::Uri = "/api".parse().unwrap();
        let host = ("host", "127.0.0.1:6443");
        assert!(same_origin(&h1, &headers(&[host])));
        assert!(same_origin(
            &h2,
            &headers(&[("origin", "https://127.0.0.1:6443")])
        ));
        assert!(same_origin(
            &h1,
            &headers(&[host, ("origin", "https://127.0.0.1:6443")])
        ));
        assert!(!same_origin(
            &h1,
            &headers(&[host, ("origin", "https://evil.example")])
        ));
        assert!(!same_origin(
            &h1,
            &headers(&[host, ("origin", "http://127.0.0.1:6443")])
        ));
        assert!(!same_origin(&h1, &headers(&[host, ("origin", "null")])));
        assert!(!same_origin(
            &h1,
            &headers(&[("origin", "https://127.0.0.1:6443")])
        ));
    }
}
