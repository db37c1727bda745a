//! How aggregated API servers are called: HTTPS over HTTP/1.1 to one ready endpoint of the
//! APIService's Service, the certificate verified against `caBundle` for `NAME.NAMESPACE.svc`
//! (or not at all with `insecureSkipTLSVerify`), presenting the front-proxy client
//! certificate, and the user named in `X-Remote-User`/`X-Remote-Group`/`X-Remote-Extra-*` —
//! what aggregated servers trust once `extension-apiserver-authentication` tells them the
//! front-proxy CA. Connections are kept for reuse ([`Pool`]) per address, server name and
//! TLS settings, returned once an answer has been read to its end: a watch holds its own
//! for its lifetime, and an answer dropped early closes its connection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::auth::User;

/// How long connecting and the TLS handshake may take (kube's proxy dialer: 30 s).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// The front-proxy client certificate and key.
pub(crate) struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Identity {
    /// From PEM.
    pub(crate) fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Identity, String> {
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        if chain.is_empty() {
            return Err("no certificate in the PEM".to_owned());
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| e.to_string())?;
        Ok(Identity { chain, key })
    }
}

/// The TLS settings of one APIService.
pub(crate) fn tls_config(
    ca_bundle: Option<&[u8]>,
    insecure: bool,
    identity: Option<&Identity>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::node_client::UnverifiedAgent(
                provider,
            )))
    } else {
        builder.with_root_certificates(crate::webhook::client::root_store(ca_bundle)?)
    };
    let mut config = match identity {
        Some(id) => builder
            .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
            .map_err(|e| format!("the front-proxy client certificate is unusable: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Headers a proxy does not pass on (hop-by-hop), lower case.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The headers of a request to pass on: without hop-by-hop ones, credentials, impersonation,
/// or identity headers the client made up; with `Host` and the user's identity.
pub(crate) fn forwarded_headers(incoming: &HeaderMap, host: &str, user: &User) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in incoming {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower)
            || lower == "host"
            || lower == "authorization"
            || lower.starts_with("x-remote-")
            || lower.starts_with("impersonate-")
        {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    if let Ok(host) = HeaderValue::from_str(host) {
        headers.insert(http::header::HOST, host);
    }
    if let Ok(name) = HeaderValue::from_str(&user.name) {
        headers.insert(HeaderName::from_static("x-remote-user"), name);
    }
    for group in &user.groups {
        if let Ok(group) = HeaderValue::from_str(group) {
            headers.append(HeaderName::from_static("x-remote-group"), group);
        }
    }
    headers
}

/// The headers of an answer to pass back (without hop-by-hop ones).
pub(crate) fn returned_headers(incoming: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in incoming {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// Idle connections kept per address.
const IDLE_PER_ADDRESS: usize = 8;

/// Connections are shared by APIServices with the same address, server name and TLS settings
/// (a fingerprint of `caBundle` and `insecureSkipTLSVerify`).
type PoolKey = (SocketAddr, String, u64);

/// Idle connections to aggregated API servers. Cheap to share.
#[derive(Default)]
pub(crate) struct Pool {
    idle: parking_lot::Mutex<HashMap<PoolKey, Vec<SendRequest<Full<Bytes>>>>>,
}

impl Pool {
    /// An idle connection to `key` that can take a request now (one just given back may
    /// need a moment to finish its last exchange).
    async fn take(&self, key: &PoolKey) -> Option<SendRequest<Full<Bytes>>> {
        loop {
            let mut sender = self.idle.lock().get_mut(key)?.pop()?;
            if sender.is_closed() {
                continue;
            }
            if sender.is_ready()
                || matches!(
                    tokio::time::timeout(Duration::from_millis(100), sender.ready()).await,
                    Ok(Ok(()))
                )
            {
                return Some(sender);
            }
        }
    }

    fn give_back(&self, key: PoolKey, sender: SendRequest<Full<Bytes>>) {
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

/// Where a request goes.
pub(crate) struct Destination<'a> {
    pub(crate) tls: &'a Arc<rustls::ClientConfig>,
    /// The fingerprint of the TLS settings (connections are reused only with the same).
    pub(crate) tls_key: u64,
    pub(crate) address: SocketAddr,
    /// The name the certificate must be for.
    pub(crate) server_name: &'a str,
}

/// An answer's body that gives its connection back to the pool once read to its end.
pub(crate) struct PooledBody {
    inner: Incoming,
    give_back: Option<(Arc<Pool>, PoolKey, SendRequest<Full<Bytes>>)>,
}

impl http_body::Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        // The end: no more frames, or (a body of known length) the last one, after which the
        // transport does not poll again.
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            _ => false,
        };
        if ended {
            if let Some((pool, key, sender)) = self.give_back.take() {
                pool.give_back(key, sender);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A request to send (kept whole so that it can be sent again).
#[derive(Clone)]
pub(crate) struct Outgoing {
    pub(crate) method: http::Method,
    /// Path and query.
    pub(crate) uri: http::Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Outgoing {
    fn request(&self) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Sends `outgoing` to `to` on an idle connection of `pool` or a new one; the answer once its
/// head has arrived, its body streaming (dropping it early closes the connection). A request
/// an idle connection could not take (the server had closed it), or a `GET` whose reused
/// connection failed before an answer, goes again on a new one, as Go's client does. The
/// error is worded as Go words it, after `Get "URL": ` in kube's messages.
pub(crate) async fn send(
    pool: &Arc<Pool>,
    to: &Destination<'_>,
    outgoing: &Outgoing,
) -> Result<Response<PooledBody>, String> {
    let key = (to.address, to.server_name.to_owned(), to.tls_key);
    if let Some(mut sender) = pool.take(&key).await {
        match sender.try_send_request(outgoing.request()).await {
            Ok(answer) => return Ok(pooled(pool, key, sender, answer)),
            Err(mut e) => {
                let unsent = e.take_message().is_some();
                if !unsent && outgoing.method != http::Method::GET {
                    return Err(e.into_error().to_string());
                }
            }
        }
    }
    let mut sender = connect(to).await?;
    let answer = sender
        .send_request(outgoing.request())
        .await
        .map_err(|e| e.to_string())?;
    Ok(pooled(pool, key, sender, answer))
}

fn pooled(
    pool: &Arc<Pool>,
    key: PoolKey,
    sender: SendRequest<Full<Bytes>>,
    answer: Response<Incoming>,
) -> Response<PooledBody> {
    answer.map(|inner| PooledBody {
        inner,
        give_back: Some((pool.clone(), key, sender)),
    })
}

/// A new connection: TCP, TLS verified for `to.server_name`, HTTP/1.1, within
/// [`DIAL_TIMEOUT`].
async fn connect(to: &Destination<'_>) -> Result<SendRequest<Full<Bytes>>, String> {
    tokio::time::timeout(
        DIAL_TIMEOUT,
        crate::webhook::client::connect(to.tls, to.address, to.server_name),
    )
    .await
    .map_err(|_| format!("dial tcp {}: i/o timeout", to.address))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_headers_should_replace_the_clients() {
        let mut incoming = HeaderMap::new();
        incoming.insert("authorization", HeaderValue::from_static("Bearer x"));
        incoming.insert("x-remote-user", HeaderValue::from_static("mallory"));
        incoming.insert("x-remote-extra-scopes", HeaderValue::from_static("all"));
        incoming.insert("impersonate-user", HeaderValue::from_static("root"));
        incoming.insert("connection", HeaderValue::from_static("keep-alive"));
        incoming.insert("accept", HeaderValue::from_static("application/json"));
        let user = User::new("alice", ["devs".to_owned()]);
        let h = forwarded_headers(&incoming, "api.w.svc:443", &user);
        assert_eq!(h["x-remote-user"], "alice");
        let groups: Vec<_> = h.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["devs", "system:authenticated"]);
        assert_eq!(h["host"], "api.w.svc:443");
        assert_eq!(h["accept"], "application/json");
        for gone in [
            "authorization",
            "x-remote-extra-scopes",
            "impersonate-user",
            "connection",
        ] {
            assert!(!h.contains_key(gone), "{gone}");
        }
    }
}
