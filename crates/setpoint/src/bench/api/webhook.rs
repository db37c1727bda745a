//! Creates through a webhook: one no-op validating webhook (allows everything) served over
//! HTTPS by this process, registered for ConfigMap creates, then [`CLIENTS`] HTTP/1.1 clients
//! `POST` 1 KiB ConfigMaps into `bench-webhook` — every create makes the API server call the
//! webhook. Reports creates per second against the target, the latency, the CPU both
//! processes used and how many reviews the webhook answered. The configuration is deleted
//! afterwards, so the benchmarks after this one write without it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context as _, Result};
use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::client::{Call, Protocol};
use super::load::{self, Budget, MakeCall, CLIENTS};
use super::Harness;
use crate::bench::report::{self, Row};
use crate::bench::usage::Meter;

/// The namespace created in.
const NAMESPACE: &str = "bench-webhook";
/// The configuration registered.
const CONFIGURATION: &str = "bench-noop";
/// Creates per second to reach (issue 16).
const TARGET: u64 = 3_000;
/// How long a new configuration is given to reach the server's watch cache.
const SETTLE: Duration = Duration::from_millis(500);

/// Runs the webhook benchmark.
pub(super) async fn bench_webhook(harness: &mut Harness) -> Result<Vec<Row>> {
    let label = format!(
        "creates through 1 validating webhook: {}",
        load::clients_label(Protocol::Http1)
    );
    eprintln!("[{label}]");
    let hook = NoopWebhook::start().await?;
    let mut admin = harness.client.connect(Protocol::Http1).await?;
    load::create_namespace(&mut admin, NAMESPACE).await?;
    let configurations = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    admin
        .call(Call::post_json(
            configurations,
            hook.configuration().to_string(),
        ))
        .await
        .context("registering the webhook")?;
    tokio::time::sleep(SETTLE).await;

    let connections = load::clients(&harness.client, Protocol::Http1, CLIENTS).await?;
    let path = load::configmaps(NAMESPACE);
    let make: MakeCall = Arc::new(move |i| {
        Call::post_json(path.clone(), load::configmap(&load::name("cm-wh", i), 0))
    });
    let sizes = harness.sizes;
    let meter = Meter::start(harness.server.pid())?;
    let ran = load::run(
        connections,
        Budget::new(sizes.creates, sizes.run_time),
        make,
    )
    .await?;
    let cpu = meter.stop()?;
    let reviews = hook.reviews.load(Ordering::Relaxed);

    admin
        .call(Call {
            method: Method::DELETE,
            path: format!("{configurations}/{CONFIGURATION}"),
            body: None,
            expect: StatusCode::OK,
        })
        .await
        .context("deleting the webhook's configuration")?;
    tokio::time::sleep(SETTLE).await;
    ensure!(
        ran.ops > 0,
        "no create finished within {:?}",
        sizes.run_time
    );
    ensure!(
        reviews >= ran.ops,
        "the webhook answered {reviews} reviews for {} creates: not every create was admitted by it",
        ran.ops
    );
    harness.objects += ran.ops;
    Ok(vec![
        Row::new(
            format!("{label}, 1 KiB ConfigMaps"),
            format!(
                "{} creates/s ({} in {:.2} s; {} reviews)",
                report::rate(ran.ops, ran.elapsed),
                report::count(ran.ops),
                ran.elapsed.as_secs_f64(),
                report::count(reviews)
            ),
        )
        .latency(ran.latencies.summary())
        .target(
            format!("≥ {}/s", report::count(TARGET)),
            report::per_second(ran.ops, ran.elapsed) >= TARGET,
        ),
        cpu.row(&label, ran.ops, "create"),
    ])
}

/// A webhook that allows every review, on a loopback port with a certificate of its own CA.
struct NoopWebhook {
    url: String,
    ca_pem: String,
    /// Reviews answered.
    reviews: Arc<AtomicU64>,
    /// Holds the credentials' directory until the benchmark ends.
    _dir: tempfile::TempDir,
}

impl NoopWebhook {
    async fn start() -> Result<NoopWebhook> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let dir = tempfile::tempdir()?;
        let data = dir.path().join("webhook");
        let pki = tokio::task::spawn_blocking(move || {
            setpoint_apiserver::Pki::load_or_create(&data, address)
        })
        .await?
        .context("making the webhook's certificate")?;
        let pem = |file: &str| std::fs::read(pki.dir().join(file));
        let chain = CertificateDer::pem_slice_iter(&pem("server.crt")?)
            .collect::<Result<Vec<_>, _>>()
            .context("the webhook's certificate")?;
        let key =
            PrivateKeyDer::from_pem_slice(&pem("server.key")?).context("the webhook's key")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let reviews = Arc::new(AtomicU64::new(0));
        let counter = reviews.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, counter) = (acceptor.clone(), counter.clone());
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service =
                        hyper::service::service_fn(move |request| answer(request, counter.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(NoopWebhook {
            url: format!("https://{address}/validate"),
            ca_pem: pki.ca_certificate_pem().to_owned(),
            reviews,
            _dir: dir,
        })
    }

    /// Its ValidatingWebhookConfiguration: ConfigMap creates.
    fn configuration(&self) -> Value {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION},
            "webhooks": [{
                "name": "noop.bench.setpoint.dev",
                "clientConfig": {
                    "url": self.url,
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.ca_pem),
                },
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"]}],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }],
        })
    }
}

/// Allows the review in `request`.
async fn answer(
    request: Request<Incoming>,
    reviews: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    let uid = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|r| r["request"]["uid"].as_str().map(str::to_owned))
        .unwrap_or_default();
    reviews.fetch_add(1, Ordering::Relaxed);
    let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true}});
    let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
