//! One client connection: the TLS handshake (bounded in time), then HTTP/1.1 or HTTP/2 as the
//! client chose, until the client closes it or the server shuts down. On shutdown a connection
//! finishes what it is doing (HTTP/1.1: the current request; HTTP/2: open streams, after a
//! GOAWAY) and closes; the accept loop aborts it if that takes too long.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::request::{serve_request, RequestContext};
use crate::auth;

/// How long a client may take to send a request's headers (HTTP/1.1).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest HTTP/2 header block accepted: Go's `http.DefaultMaxHeaderBytes`, which
/// kube-apiserver keeps. (hyper's default of 16 KiB made h2 drop the whole connection, without
/// an answer, on a request whose URL was a little longer.)
const MAX_HEADER_LIST_BYTES: u32 = 1 << 20;
/// Concurrent streams per HTTP/2 connection, as kube-apiserver allows: client-go runs every
/// watch of a process over one connection.
const MAX_CONCURRENT_STREAMS: u32 = 1000;

/// What every connection shares.
pub(crate) struct ConnectionContext {
    /// Performs TLS handshakes.
    pub(crate) acceptor: TlsAcceptor,
    /// Serves HTTP/1.1 and HTTP/2.
    pub(crate) http: auto::Builder<TokioExecutor>,
    /// How long a TLS handshake may take.
    pub(crate) handshake_timeout: Duration,
    /// What requests need.
    pub(crate) requests: Arc<RequestContext>,
}

impl ConnectionContext {
    /// The HTTP/1.1 + HTTP/2 server settings.
    pub(crate) fn http_builder() -> auto::Builder<TokioExecutor> {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_header_list_size(MAX_HEADER_LIST_BYTES);
        builder
    }
}

/// Serves the connection `stream` from `peer` until it closes or `shutdown` is cancelled and
/// it has finished its work.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    context: Arc<ConnectionContext>,
    shutdown: CancellationToken,
) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%peer, %error, "cannot disable Nagle's algorithm");
    }
    let handshake =
        tokio::time::timeout(context.handshake_timeout, context.acceptor.accept(stream));
    let tls = tokio::select! {
        () = shutdown.cancelled() => return,
        handshake = handshake => match handshake {
            Ok(Ok(tls)) => tls,
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                return;
            }
            Err(_elapsed) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
    };
    let certificate_user = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(auth::user_from_certificate);

    let requests = context.requests.clone();
    let service = service_fn(move |request| {
        let requests = requests.clone();
        let user = certificate_user.clone();
        async move { Ok::<_, Infallible>(serve_request(requests, user, peer, request).await) }
    });
    let connection = context
        .http
        .serve_connection_with_upgrades(TokioIo::new(tls), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}
