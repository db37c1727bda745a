//! The `/metrics` endpoint: [`Metrics::serve`] answers Prometheus scrapes over plain
//! HTTP/1.1.
//!
//! Plain HTTP is how metrics are scraped almost everywhere (Prometheus inside the cluster,
//! or a sidecar on localhost): the endpoint carries no secrets and takes no input. Bind it to
//! `127.0.0.1` or the pod's address, not a public one; where scrapes must be authenticated,
//! put a TLS/authorizing proxy in front of it.
//!
//! Answers: `GET /metrics` (any query string) → `200` with the rendered registry and
//! `Content-Type: text/plain; version=0.0.4; charset=utf-8`; another method on `/metrics` →
//! `405`; any other path → `404`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::encoder::CONTENT_TYPE;
use super::registry::Metrics;

/// The path scrapes ask for.
const PATH: &str = "/metrics";
/// How long a client may take to send a request's headers (guards against idle sockets).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for scrapes in progress before dropping their connections.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long to pause after a failed `accept` (such as running out of file descriptors).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

impl Metrics {
    /// Serves `GET /metrics` on `listener` until `shutdown` resolves, then stops accepting,
    /// lets scrapes in progress finish (for up to 5 s) and returns. Errors on single
    /// connections are logged, never fatal.
    ///
    /// Spawn it: `tokio::spawn(metrics.clone().serve(listener, shutdown))`. Cancel-safe:
    /// dropping the future closes the listener and every connection at once.
    ///
    /// ```no_run
    /// # async fn example(metrics: setpoint_runtime::Metrics) -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    /// let shutdown = async {
    ///     let _ = tokio::signal::ctrl_c().await;
    /// };
    /// metrics.serve(listener, shutdown).await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let (stop, stopping) = watch::channel(false);
        let mut connections = JoinSet::new();
        let mut shutdown = pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        connections.spawn(connection(self.clone(), stream, stopping.clone()));
                    }
                    Err(error) => {
                        tracing::warn!(%error, "metrics endpoint: accept failed");
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(listener);
        let _ = stop.send(true);
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
            while connections.join_next().await.is_some() {}
        });
        if drained.await.is_err() {
            connections.shutdown().await;
        }
    }
}

/// Serves one connection until the client closes it, or until `stopping` turns true and
/// the request in progress (if any) is answered.
async fn connection(metrics: Metrics, stream: TcpStream, mut stopping: watch::Receiver<bool>) {
    let service = service_fn(move |request| {
        let response = respond(&metrics, &request);
        async move { Ok::<_, Infallible>(response) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "metrics endpoint: connection failed");
            }
            return;
        }
        _ = stopping.wait_for(|&stop| stop) => conn.as_mut().graceful_shutdown(),
    }
    if let Err(error) = conn.await {
        tracing::debug!(%error, "metrics endpoint: connection failed while shutting down");
    }
}

/// The response to one request.
fn respond(metrics: &Metrics, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = if request.uri().path() != PATH {
        (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found\n".to_owned(),
        )
    } else if request.method() != Method::GET {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET\n".to_owned(),
        )
    } else {
        (StatusCode::OK, CONTENT_TYPE, metrics.render())
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(header::ALLOW, header::HeaderValue::from_static("GET"));
    }
    response
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Sends `request` on a fresh connection and reads until the server closes it.
    async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("write the request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .expect("read the response");
        response
    }

    async fn start(metrics: Metrics) -> (std::net::SocketAddr, watch::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let (stop, mut stopped) = watch::channel(());
        tokio::spawn(metrics.serve(listener, async move {
            let _ = stopped.changed().await;
        }));
        (addr, stop)
    }

    #[tokio::test]
    async fn endpoint_should_serve_the_registry_as_text_format_0_0_4() {
        let metrics = Metrics::new();
        metrics.add_leader_election("lock", || true);
        let (addr, _stop) = start(metrics).await;
        let response = exchange(
            addr,
            "GET /metrics?x=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(
            response
                .to_ascii_lowercase()
                .contains("\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            "{response}"
        );
        assert!(
            response.ends_with("\r\n\r\n# HELP leader_election_master_status Whether this process holds the election's lease now (1) or stands by (0)\n# TYPE leader_election_master_status gauge\nleader_election_master_status{name=\"lock\"} 1\n"),
            "{response}"
        );
    }

    #[tokio::test]
    async fn endpoint_should_answer_404_elsewhere_and_405_to_other_methods() {
        let (addr, _stop) = start(Metrics::new()).await;
        let other = exchange(
            addr,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
        let post = exchange(
            addr,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{post}"
        );
        assert!(
            post.to_ascii_lowercase().contains("\r\nallow: get\r\n"),
            "{post}"
        );
    }

    #[tokio::test]
    async fn serve_should_return_after_shutdown_closing_idle_keep_alive_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let (stop, mut stopped) = watch::channel(());
        let server = tokio::spawn(Metrics::new().serve(listener, async move {
            let _ = stopped.changed().await;
        }));
        // A keep-alive connection that has finished one scrape and stays open.
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut first = [0u8; 12];
        stream.read_exact(&mut first).await.expect("a response");
        assert_eq!(&first, b"HTTP/1.1 200");
        stop.send(()).expect("the server is listening");
        server.await.expect("serve returns without panicking");
        let mut rest = Vec::new();
        stream
            .read_to_end(&mut rest)
            .await
            .expect("the server closed the connection");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "no longer listening"
        );
    }
}
