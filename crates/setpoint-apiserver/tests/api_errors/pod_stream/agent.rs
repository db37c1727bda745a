//! A fake node agent for the stream proxy: TLS on 127.0.0.1 requiring client certificates of
//! a given CA, HTTP/1.1 with upgrades. `/exec/…` upgrade requests are answered `101` and the
//! upgraded connection echoes every byte back until the client half-closes; every other
//! request is refused with a 400 `Status` and a marker header, so relaying can be checked
//! byte for byte. Each request's method, target, version and headers are recorded.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use rustls::pki_types::PrivateKeyDer;
use rustls::server::WebPkiClientVerifier;
use setpoint_testenv::tls::root_store;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// The refusal's body, relayed verbatim.
pub(super) const REFUSAL: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"unable to upgrade connection: container not found (\"app\")","reason":"BadRequest","code":400}"#;

/// One request the agent saw.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) method: Method,
    pub(super) target: String,
    pub(super) version: Version,
    pub(super) headers: HeaderMap,
}

/// A running fake agent.
pub(super) struct FakeAgent {
    pub(super) port: u16,
    pub(super) seen: Arc<Mutex<Vec<Seen>>>,
}

/// Starts a fake agent trusting client certificates issued by `ca_pem`.
pub(super) async fn start(ca_pem: &str) -> FakeAgent {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(root_store(ca_pem)), provider.clone())
            .build()
            .unwrap();
    let serving = rcgen::generate_simple_self_signed(vec!["node".to_owned()]).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![serving.cert.der().clone()],
            PrivateKeyDer::Pkcs8(serving.signing_key.serialize_der().into()),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |request| {
                    let log = log.clone();
                    async move { Ok::<_, Infallible>(answer(request, &log)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    FakeAgent { port, seen }
}

type AgentBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn answer(mut request: Request<Incoming>, log: &Mutex<Vec<Seen>>) -> Response<AgentBody> {
    log.lock().push(Seen {
        method: request.method().clone(),
        target: request.uri().to_string(),
        version: request.version(),
        headers: request.headers().clone(),
    });
    let upgrade = request.headers().get(http::header::UPGRADE).cloned();
    if let (true, Some(upgrade)) = (request.uri().path().starts_with("/exec/"), upgrade) {
        let on_upgrade = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let mut io = TokioIo::new(upgraded);
            let mut buffer = vec![0_u8; 64 * 1024];
            loop {
                match io.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if io.write_all(&buffer[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = io.shutdown().await;
        });
        return Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, upgrade)
            .header("X-Stream-Protocol-Version", "v4.channel.k8s.io")
            .body(Full::new(Bytes::new()).boxed())
            .unwrap();
    }
    Response::builder()
        .status(StatusCode::BAD_REQUEST)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header("X-Fake-Agent", "refused")
        .body(Full::new(Bytes::from_static(REFUSAL.as_bytes())).boxed())
        .unwrap()
}
