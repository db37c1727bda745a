//! An HTTPS client for the benchmarks, built on hyper's connection-level API so that every
//! connection is explicit: a benchmark opens exactly the connections it says it uses and sends
//! on each one request at a time (HTTP/1.1, keep-alive) or many concurrent streams (HTTP/2).
//! TLS is rustls on the ring provider, trusting only the cluster CA; every request carries the
//! admin bearer token.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _, Result};
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use crate::bench::kubeconfig::Endpoint;

/// The longest a request may take, its whole response body included; a benchmark whose
/// request takes longer fails instead of hanging.
pub(in crate::bench) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The HTTP version of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::bench) enum Protocol {
    /// HTTP/1.1: one request at a time per connection.
    Http1,
    /// HTTP/2: concurrent streams on one connection.
    Http2,
}

/// Opens connections to one API server.
pub(in crate::bench) struct Client {
    /// Where the server is.
    endpoint: Endpoint,
    /// TLS offering only `http/1.1`.
    http1: TlsConnector,
    /// TLS offering only `h2`.
    http2: TlsConnector,
    /// `Bearer <token>`.
    authorization: HeaderValue,
}

impl Client {
    /// A client for `endpoint`, trusting its CA only.
    pub(in crate::bench) fn new(endpoint: Endpoint) -> Result<Self> {
        let ca = CertificateDer::from_pem_slice(endpoint.ca_pem.as_bytes())
            .context("reading the CA certificate")?;
        let mut roots = RootCertStore::empty();
        roots.add(ca).context("trusting the CA certificate")?;
        let config = |alpn: &[u8]| -> Result<TlsConnector> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .context("configuring TLS")?
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            config.alpn_protocols = vec![alpn.to_vec()];
            Ok(TlsConnector::from(Arc::new(config)))
        };
        let mut authorization = HeaderValue::from_str(&format!("Bearer {}", endpoint.token))
            .context("the token is not a valid header value")?;
        authorization.set_sensitive(true);
        Ok(Client {
            http1: config(b"http/1.1")?,
            http2: config(b"h2")?,
            endpoint,
            authorization,
        })
    }

    /// Opens a connection: TCP, the TLS handshake, then the HTTP handshake.
    pub(in crate::bench) async fn connect(&self, protocol: Protocol) -> Result<Connection> {
        let addr = self.endpoint.addr;
        let tcp = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        tcp.set_nodelay(true)?;
        let connector = match protocol {
            Protocol::Http1 => &self.http1,
            Protocol::Http2 => &self.http2,
        };
        let tls = connector
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await
            .context("TLS handshake")?;
        let io = TokioIo::new(tls);
        let (sender, driver) = match protocol {
            Protocol::Http1 => {
                let (sender, connection) = http1::handshake(io).await?;
                (Sender::Http1(sender), tokio::spawn(drive(connection)))
            }
            Protocol::Http2 => {
                let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                    .adaptive_window(true)
                    .handshake(io)
                    .await?;
                (Sender::Http2(sender), tokio::spawn(drive(connection)))
            }
        };
        Ok(Connection {
            sender,
            driver: Arc::new(Driver(driver)),
            authority: Arc::from(addr.to_string()),
            authorization: self.authorization.clone(),
        })
    }

    /// Opens `n` connections of `protocol`, one after the other.
    pub(in crate::bench) async fn connect_many(
        &self,
        protocol: Protocol,
        n: usize,
    ) -> Result<Vec<Connection>> {
        let mut connections = Vec::with_capacity(n);
        for _ in 0..n {
            connections.push(self.connect(protocol).await?);
        }
        Ok(connections)
    }
}

/// Runs a connection's I/O until it closes.
async fn drive<C: std::future::Future<Output = hyper::Result<()>>>(connection: C) {
    if let Err(error) = connection.await {
        tracing::debug!(%error, "benchmark connection ended with an error");
    }
}

/// The task running a connection's I/O; aborted when the last handle to it is dropped.
struct Driver(JoinHandle<()>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How requests are sent on a connection.
enum Sender {
    /// One at a time.
    Http1(http1::SendRequest<Full<Bytes>>),
    /// As concurrent streams; clones share the connection.
    Http2(http2::SendRequest<Full<Bytes>>),
}

/// A request to send, and the status it must be answered with.
pub(in crate::bench) struct Call {
    /// The method.
    pub(in crate::bench) method: Method,
    /// The path and query, e.g. `/api/v1/namespaces/default/configmaps`.
    pub(in crate::bench) path: String,
    /// The body and its content type, if any.
    pub(in crate::bench) body: Option<(&'static str, Bytes)>,
    /// The status of a successful answer.
    pub(in crate::bench) expect: StatusCode,
}

impl Call {
    /// `GET path`, answered `200 OK`.
    pub(in crate::bench) fn get(path: impl Into<String>) -> Self {
        Call {
            method: Method::GET,
            path: path.into(),
            body: None,
            expect: StatusCode::OK,
        }
    }

    /// `POST path` with a JSON body, answered `201 Created`.
    pub(in crate::bench) fn post_json(path: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Call {
            method: Method::POST,
            path: path.into(),
            body: Some(("application/json", body.into())),
            expect: StatusCode::CREATED,
        }
    }

    /// `DELETE path`, answered `200 OK`.
    pub(in crate::bench) fn delete(path: impl Into<String>) -> Self {
        Call {
            method: Method::DELETE,
            path: path.into(),
            body: None,
            expect: StatusCode::OK,
        }
    }

    /// `PATCH path` with a JSON merge patch, answered `200 OK`.
    pub(in crate::bench) fn merge_patch(path: impl Into<String>, patch: impl Into<Bytes>) -> Self {
        Call {
            method: Method::PATCH,
            path: path.into(),
            body: Some(("application/merge-patch+json", patch.into())),
            expect: StatusCode::OK,
        }
    }
}

impl Call {
    /// `PATCH path` with a server-side apply configuration (JSON), answered `expect` (`200`,
    /// or `201` when the apply creates the object).
    pub(in crate::bench) fn apply(
        path: impl Into<String>,
        config: impl Into<Bytes>,
        expect: StatusCode,
    ) -> Self {
        Call {
            method: Method::PATCH,
            path: path.into(),
            body: Some(("application/apply-patch+yaml", config.into())),
            expect,
        }
    }
}

/// One open connection. For HTTP/1.1 a request must be answered (body included) before the next
/// is sent; HTTP/2 connections can be [shared](Connection::share) for concurrent streams.
pub(in crate::bench) struct Connection {
    /// Sends requests.
    sender: Sender,
    /// The I/O task, shared by the handles of an HTTP/2 connection.
    driver: Arc<Driver>,
    /// `host:port`, for the `Host` header or the `:authority` pseudo-header.
    authority: Arc<str>,
    /// `Bearer <token>`.
    authorization: HeaderValue,
}

impl Connection {
    /// Another handle on the same HTTP/2 connection, for a concurrent stream.
    pub(in crate::bench) fn share(&self) -> Result<Connection> {
        let Sender::Http2(sender) = &self.sender else {
            bail!("an HTTP/1.1 connection cannot carry concurrent requests");
        };
        Ok(Connection {
            sender: Sender::Http2(sender.clone()),
            driver: self.driver.clone(),
            authority: self.authority.clone(),
            authorization: self.authorization.clone(),
        })
    }

    /// Sends `call` and returns the response once its headers have arrived.
    pub(in crate::bench) async fn open(&mut self, call: Call) -> Result<Response<Incoming>> {
        let (content_type, body) = call.body.unwrap_or(("", Bytes::new()));
        let mut builder = Request::builder()
            .method(call.method)
            .header(header::AUTHORIZATION, self.authorization.clone())
            .header(header::ACCEPT, "application/json");
        if !content_type.is_empty() {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        let response = match &mut self.sender {
            Sender::Http1(sender) => {
                let request = builder
                    .uri(&call.path)
                    .header(header::HOST, &*self.authority)
                    .body(Full::new(body))?;
                sender.ready().await.context("the connection closed")?;
                sender.send_request(request).await
            }
            Sender::Http2(sender) => {
                let uri = format!("https://{}{}", self.authority, call.path);
                let request = builder.uri(uri).body(Full::new(body))?;
                sender.ready().await.context("the connection closed")?;
                sender.send_request(request).await
            }
        };
        response.context("sending the request")
    }

    /// Sends `call`, reads the whole response and checks its status is the expected one;
    /// returns the body. Fails after [`REQUEST_TIMEOUT`].
    pub(in crate::bench) async fn call(&mut self, call: Call) -> Result<Bytes> {
        let what = format!("{} {}", call.method, call.path);
        let expect = call.expect;
        let exchange = async {
            let response = self.open(call).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            ensure!(
                status == expect,
                "answered {status} instead of {expect}: {}",
                String::from_utf8_lossy(&body[..body.len().min(500)])
            );
            Ok(body)
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .with_context(|| format!("{what}: no complete answer within {REQUEST_TIMEOUT:?}"))?
            .with_context(|| what)
    }
}
