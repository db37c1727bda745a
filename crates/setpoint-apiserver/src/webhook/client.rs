//! How webhooks are called: an HTTPS `POST` of a JSON body to an address, verifying the
//! webhook's certificate against the configuration's `caBundle` (or the system's roots when
//! there is none) for the host name the configuration gives, over HTTP/1.1 with connections
//! kept and reused per address and TLS settings. The whole call — connecting, the handshake,
//! sending, and reading the answer — is bounded by the webhook's timeout.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

/// The largest answer a webhook may give (kube-apiserver reads at most this many bytes too).
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

/// Idle connections kept per address.
const IDLE_PER_ADDRESS: usize = 16;

/// Why a call failed: the text follows `failed to call webhook: `.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("Post {url:?}: {message}")]
    Transport { url: String, message: String },
    #[error("Post {url:?}: context deadline exceeded")]
    Timeout { url: String },
    #[error(
        "the server responded with the status code {code} but did not return more information"
    )]
    Status { code: u16 },
    #[error("the response body is too large (over {MAX_RESPONSE_BYTES} bytes)")]
    TooLarge,
}

/// The TLS settings of one webhook: its trust roots. Built once per configuration.
pub(crate) fn tls_config(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, String> {
    let roots = root_store(ca_bundle)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The roots a `caBundle` (PEM) names, or the system's roots when there is none.
pub(crate) fn root_store(ca_bundle: Option<&[u8]>) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle.filter(|b| !b.is_empty()) {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("the caBundle is not PEM: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("the caBundle holds an unusable certificate: {e}"))?;
            }
            if roots.is_empty() {
                return Err("the caBundle holds no certificate".to_owned());
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system root rustls cannot use is skipped, as Go skips it.
                let _ = roots.add(cert);
            }
        }
    }
    Ok(roots)
}

/// Where one call goes.
pub(crate) struct Target<'a> {
    /// The address connected to.
    pub(crate) address: SocketAddr,
    /// The name the certificate must be for (a DNS name or the IP address).
    pub(crate) server_name: &'a str,
    /// The `Host` header (`host[:port]`).
    pub(crate) host: &'a str,
    /// Path and query.
    pub(crate) path: &'a str,
    /// The URL, for error messages.
    pub(crate) url: &'a str,
}

/// Connections are shared by webhooks with the same address, server name and trust roots
/// (a fingerprint of their `caBundle`), so recompiling a configuration keeps them.
type PoolKey = (SocketAddr, String, u64);

/// Connections to webhooks, kept for reuse. Cheap to share.
#[derive(Default)]
pub(crate) struct Client {
    idle: parking_lot::Mutex<HashMap<PoolKey, Vec<SendRequest<Full<Bytes>>>>>,
}

impl Client {
    /// Posts `body` (JSON) to `target` within `timeout`; the answer's body on a 200.
    /// Cancel-safe (a connection in use is dropped, not returned to the pool).
    pub(crate) async fn post(
        &self,
        tls: &Arc<rustls::ClientConfig>,
        tls_key: u64,
        target: &Target<'_>,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, CallError> {
        match tokio::time::timeout(timeout, self.exchange(tls, tls_key, target, body)).await {
            Ok(result) => result,
            Err(_) => Err(CallError::Timeout {
                url: target.url.to_owned(),
            }),
        }
    }

    async fn exchange(
        &self,
        tls: &Arc<rustls::ClientConfig>,
        tls_key: u64,
        target: &Target<'_>,
        body: Bytes,
    ) -> Result<Bytes, CallError> {
        let transport = |message: String| CallError::Transport {
            url: target.url.to_owned(),
            message,
        };
        let key: PoolKey = (target.address, target.server_name.to_owned(), tls_key);
        let mut sender = match self.take_idle(&key) {
            Some(sender) => sender,
            None => connect(tls, target.address, target.server_name)
                .await
                .map_err(transport)?,
        };
        let request = Request::post(target.path)
            .header(http::header::HOST, target.host)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(body))
            .map_err(|e| transport(format!("building the request: {e}")))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| transport(e.to_string()))?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    CallError::TooLarge
                } else {
                    transport(format!("reading the response: {e}"))
                }
            })?
            .to_bytes();
        self.put_idle(key, sender);
        if status != StatusCode::OK {
            return Err(CallError::Status {
                code: status.as_u16(),
            });
        }
        Ok(bytes)
    }

    fn take_idle(&self, key: &PoolKey) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock();
        let list = idle.get_mut(key)?;
        while let Some(sender) = list.pop() {
            if !sender.is_closed() && sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    fn put_idle(&self, key: PoolKey, sender: SendRequest<Full<Bytes>>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock();
        let list = idle.entry(key).or_default();
        if list.len() < IDLE_PER_ADDRESS {
            list.push(sender);
        }
    }
}

/// A new connection to `address`: TCP, TLS verified for `server_name`, HTTP/1.1 (webhooks
/// and aggregated API servers).
pub(crate) async fn connect(
    tls: &Arc<rustls::ClientConfig>,
    address: SocketAddr,
    server_name: &str,
) -> Result<SendRequest<Full<Bytes>>, String> {
    let name = ServerName::try_from(server_name.to_owned())
        .map_err(|e| format!("invalid server name {server_name:?}: {e}"))?;
    let tcp = TcpStream::connect(address)
        .await
        .map_err(|e| format!("dial tcp {address}: {}", dial_error(&e)))?;
    let _ = tcp.set_nodelay(true);
    let stream = tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, %address, "HTTPS connection ended");
        }
    });
    Ok(sender)
}

/// A connection error as Go words it (what users of kube-apiserver search for).
pub(crate) fn dial_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_owned(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_owned(),
        std::io::ErrorKind::AddrNotAvailable => {
            "connect: cannot assign requested address".to_owned()
        }
        _ => format!("connect: {e}"),
    }
}
