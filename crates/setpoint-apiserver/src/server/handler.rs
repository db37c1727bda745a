//! The seam between the transport and the API proper: a [`Handler`] is given each
//! authenticated request with its body read in full, and answers with a [`Body`] that may
//! stream (watches, logs). The transport sends each chunk of a streaming body as soon as it is
//! produced: over HTTP/1.1 a body without a `Content-Length` is sent chunked, over HTTP/2 as
//! DATA frames.

use std::io;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use http_body_util::{BodyExt, Empty, Full, StreamBody};

use crate::auth::User;
use crate::pki::Pki;

/// A response body: a whole buffer, or a stream of chunks. An error ends the response
/// abruptly (HTTP/1.1: the connection is closed; HTTP/2: the stream is reset).
pub type Body = http_body_util::combinators::BoxBody<Bytes, io::Error>;

/// Serves authenticated API requests.
///
/// The transport has already answered the health endpoints, rejected unauthenticated
/// requests (401), and read the body (at most the configured limit, else 413). The
/// `Authorization` header has been removed. A panic in `handle` is caught and answered with
/// 500; the server goes on.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Answers `request`, sent by `user`.
    ///
    /// Dropped when the client goes away or the server shuts down, so it must be cancel-safe.
    async fn handle(&self, request: http::Request<Bytes>, user: User) -> http::Response<Body>;

    /// The answer to a request that needs no credentials — the web console's pages and its
    /// login, which a browser without a session must reach — given before authentication;
    /// `None` (the default) for every other request, which is then authenticated.
    fn public(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Option<http::Response<Body>> {
        let _ = (method, uri, headers);
        None
    }

    /// Who sends a request whose connection's client certificate (verified against the cluster
    /// CA) stands for `certificate_user`, from its headers (a bearer token); `None` when this
    /// handler does not know. The transport then tries its own credentials (the certificate's
    /// user, the admin token) and answers 401 if they fail too. `None` by default; [`Api`]
    /// runs its authenticator chain (`auth/`).
    ///
    /// [`Api`]: crate::Api
    async fn authenticate(
        &self,
        certificate_user: Option<&User>,
        headers: &http::HeaderMap,
    ) -> Option<User> {
        let _ = (certificate_user, headers);
        None
    }

    /// The user a request of `user` runs as, given its `Impersonate-*` headers, or the refusal
    /// (kube's 403 `Status`). The default refuses every impersonation: a handler without an
    /// authorizer cannot decide who may impersonate whom. [`Api`](crate::Api) authorizes it.
    fn impersonate(
        &self,
        user: User,
        headers: &http::HeaderMap,
    ) -> Result<User, setpoint_core::ApiError> {
        match super::impersonation::refuse(headers, &user) {
            Some(refused) => Err(refused),
            None => Ok(user),
        }
    }

    /// Called once by [`serve`](crate::serve) when the cluster's credentials are loaded,
    /// before the first request. The default ignores them; [`Api`](crate::Api) takes the admin
    /// client certificate to call node agents with (`pods/log`).
    fn credentials_loaded(&self, pki: &Pki) {
        let _ = pki;
    }

    /// Told of each request the transport refuses itself — no valid credentials (401, `user`
    /// `None`) or a refused impersonation (403) — before the answer is sent, so that it can be
    /// recorded (the audit log). `request` is the request's head, with the transport's
    /// extensions (its audit ID and peer address). The default does nothing.
    fn refused_by_transport(
        &self,
        request: &http::request::Parts,
        user: Option<&User>,
        failure: &setpoint_core::ApiError,
    ) {
        let _ = (request, user, failure);
    }

    /// The checks of the health endpoint `endpoint` (`healthz`, `livez` or `readyz`) beyond
    /// `ping` (and `/readyz`'s `shutdown`, which the transport runs): `(name, Ok or why not)`.
    /// None by default.
    async fn health_checks(&self, endpoint: &str) -> Vec<(String, Result<(), String>)> {
        let _ = endpoint;
        Vec::new()
    }
}

/// A body holding `bytes`, sent with a `Content-Length`.
pub fn full_body(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// `inner`, holding `guard` until the body is dropped (the stream ended or the client went
/// away): how a long-running answer keeps a count or an audit record open while it streams.
pub(crate) fn body_holding<G: Send + Sync + Unpin + 'static>(inner: Body, guard: G) -> Body {
    Body::new(Holding {
        inner,
        _guard: guard,
    })
}

/// A body and what it holds (see [`body_holding`]).
struct Holding<G> {
    inner: Body,
    _guard: G,
}

impl<G: Unpin> http_body::Body for Holding<G> {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// An empty body.
pub fn empty_body() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// A body sending each item of `stream` as a chunk as soon as it is produced; an error ends
/// the response abruptly.
pub fn stream_body<S>(stream: S) -> Body
where
    S: Stream<Item = Result<Bytes, io::Error>> + Send + Sync + 'static,
{
    BodyExt::boxed(StreamBody::new(
        stream.map(|chunk| chunk.map(http_body::Frame::data)),
    ))
}
