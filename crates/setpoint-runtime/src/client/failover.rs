//! The failover transport: one remote client per API server of a cluster (several servers on
//! one store serve the same objects), tried in turn when a server cannot be reached.
//!
//! A request goes to the server that last answered. When sending fails before any response:
//! - a refused connection (the request never reached a server) is retried on the next server,
//!   whatever the method;
//! - any other transport failure (a reset, a dropped connection) is retried on the next server
//!   only for reads (`GET`, `HEAD`, which includes watches), since a write may have been applied
//!   before the connection broke; the error is returned for writes, as a single server's client
//!   would.
//!
//! Responses, errors included, are returned as they are: an API server that answers is never
//! skipped. A watch whose server dies ends like any broken watch; the watcher's next request
//! lands on a surviving server and resumes from its last resourceVersion.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use kube::client::Body;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A `tower::Service` over several `kube` clients, each configured for one API server.
#[derive(Clone)]
pub(crate) struct FailoverService {
    clients: Arc<Vec<kube::Client>>,
    /// The index of the server that last answered.
    current: Arc<AtomicUsize>,
}

impl FailoverService {
    /// A service over `clients` (at least one), starting with the first.
    pub(crate) fn new(clients: Vec<kube::Client>) -> FailoverService {
        FailoverService {
            clients: Arc::new(clients),
            current: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl tower::Service<http::Request<Body>> for FailoverService {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let clients = self.clients.clone();
        let current = self.current.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            // Client requests are small and never streamed: keep the body to send it again.
            let body = body.collect().await?.to_bytes();
            let read = matches!(parts.method, http::Method::GET | http::Method::HEAD);
            let start = current.load(Ordering::Relaxed);
            let mut last_error = None;
            for attempt in 0..clients.len() {
                let index = (start + attempt) % clients.len();
                let mut request = http::Request::new(Body::from(body.to_vec()));
                *request.method_mut() = parts.method.clone();
                *request.uri_mut() = parts.uri.clone();
                *request.version_mut() = parts.version;
                *request.headers_mut() = parts.headers.clone();
                match clients[index].send(request).await {
                    Ok(response) => {
                        current.store(index, Ordering::Relaxed);
                        return Ok(response);
                    }
                    Err(error) if is_transport(&error) && (read || is_refused(&error)) => {
                        tracing::warn!(server = index, error = %error, "API server unreachable; trying the next");
                        last_error = Some(error);
                    }
                    Err(error) => return Err(error.into()),
                }
            }
            Err(last_error.map_or_else(|| "no API server to send to".into(), Into::into))
        })
    }
}

/// Whether `error` is a failure to talk to the server (not an answer from it).
fn is_transport(error: &kube::Error) -> bool {
    matches!(error, kube::Error::HyperError(_) | kube::Error::Service(_))
}

/// Whether a connection was refused somewhere in `error`'s causes: the request was never sent.
fn is_refused(error: &kube::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        cause = e.source();
    }
    false
}
