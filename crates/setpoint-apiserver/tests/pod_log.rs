//! `pods/log`: the container choice and its errors, the answer without node credentials, and
//! the proxy to a node agent — mutual TLS with the API server's client certificate, the query
//! passed on with the pod's UID, the body streamed chunk by chunk, and the agent's errors
//! relayed as `Status`es. The agent here is a small TLS server in the test, requiring client
//! certificates from a test CA.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use rustls::pki_types::PrivateKeyDer;
use rustls::server::WebPkiClientVerifier;
use serde_json::{json, Value};
use setpoint_apiserver::{Api, NodeClient};
use setpoint_store::{EmbeddedConfig, EmbeddedStore};
use setpoint_testenv::tls::{root_store, TestCa};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

async fn api() -> Arc<Api> {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap();
    Api::new(Arc::new(store)).await.unwrap()
}

async fn call(
    api: &Api,
    method: &str,
    uri: &str,
    body: Value,
) -> Response<setpoint_apiserver::Body> {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_string()))
        .unwrap();
    api.handle(request).await
}

async fn json_of(response: Response<setpoint_apiserver::Body>) -> (StatusCode, Value) {
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn create_pod(api: &Api, name: &str, containers: &[&str], node: Option<&str>) -> String {
    let containers: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "busybox"}))
        .collect();
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": containers},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    let (status, created) =
        json_of(call(api, "POST", "/api/v1/namespaces/default/pods", pod).await).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["metadata"]["uid"].as_str().unwrap().to_owned()
}

async fn log_error(api: &Api, uri: &str) -> (u16, String) {
    let (status, body) = json_of(call(api, "GET", uri, Value::Null).await).await;
    assert_eq!(body["kind"], "Status", "{body}");
    (
        status.as_u16(),
        body["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn log_should_refuse_an_ambiguous_or_unknown_container() {
    let api = api().await;
    create_pod(&api, "two", &["a", "b"], Some("n1")).await;
    let base = "/api/v1/namespaces/default/pods/two/log";
    assert_eq!(
        log_error(&api, base).await,
        (
            400,
            "a container name must be specified for pod two, choose one of: [a b]".to_owned()
        )
    );
    assert_eq!(
        log_error(&api, &format!("{base}?container=c")).await,
        (400, "container c is not valid for pod two".to_owned())
    );
    assert_eq!(
        log_error(&api, "/api/v1/namespaces/default/pods/missing/log")
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn log_of_an_unscheduled_pod_should_say_it_is_waiting_to_start() {
    let api = api().await;
    create_pod(&api, "pending", &["app"], None).await;
    assert_eq!(
        log_error(&api, "/api/v1/namespaces/default/pods/pending/log").await,
        (
            400,
            "container \"app\" in pod \"pending\" is waiting to start: ContainerCreating"
                .to_owned()
        )
    );
}

#[tokio::test]
async fn log_without_node_credentials_should_be_unavailable() {
    let api = api().await;
    create_pod(&api, "web", &["app"], Some("n1")).await;
    let (code, message) = log_error(&api, "/api/v1/namespaces/default/pods/web/log").await;
    assert_eq!(code, 503, "{message}");
    assert!(message.contains("no credentials"), "{message}");
}

#[tokio::test]
async fn log_should_refuse_out_of_range_options_as_kube_apiserver_does() {
    // Regression (issue 14.4): tailLines=-1 and sinceSeconds with sinceTime were accepted, and
    // sinceSeconds=9223372036854775807 reached the agent, which panicked (500).
    let api = api().await;
    create_pod(&api, "web", &["app"], Some("n1")).await;
    let base = "/api/v1/namespaces/default/pods/web/log";
    let invalid =
        |field: &str, detail: &str| format!("PodLogOptions \"web\" is invalid: {field}: {detail}");
    for (query, message) in [
        (
            "tailLines=-1",
            invalid("tailLines", "Invalid value: -1: must be greater than or equal to 0"),
        ),
        (
            "limitBytes=0",
            invalid("limitBytes", "Invalid value: 0: must be greater than 0"),
        ),
        (
            "limitBytes=-9223372036854775808",
            invalid(
                "limitBytes",
                "Invalid value: -9223372036854775808: must be greater than 0",
            ),
        ),
        (
            "sinceSeconds=0",
            invalid("sinceSeconds", "Invalid value: 0: must be greater than 0"),
        ),
        (
            "sinceSeconds=10&sinceTime=2026-01-01T00%3A00%3A00Z",
            "PodLogOptions \"web\" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".to_owned(),
        ),
    ] {
        let (status, body) =
            json_of(call(&api, "GET", &format!("{base}?{query}"), Value::Null).await).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {body}");
        assert_eq!(body["reason"], "Invalid", "{query}: {body}");
        assert_eq!(body["message"], message.as_str(), "{query}");
        assert_eq!(body["details"]["kind"], "PodLogOptions", "{query}: {body}");
        assert_eq!(body["details"]["name"], "web", "{query}: {body}");
    }
    let (_, body) = json_of(
        call(
            &api,
            "GET",
            &format!("{base}?tailLines=-1&limitBytes=0"),
            Value::Null,
        )
        .await,
    )
    .await;
    assert_eq!(
        body["message"],
        "PodLogOptions \"web\" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0, limitBytes: Invalid value: 0: must be greater than 0]"
    );
    assert_eq!(
        body["details"]["causes"][0],
        json!({"reason": "FieldValueInvalid", "field": "tailLines",
               "message": "Invalid value: -1: must be greater than or equal to 0"})
    );
    // Not numbers at all: 400, as kube-apiserver's query decoding answers.
    for query in [
        "tailLines=x",
        "sinceSeconds=9223372036854775808",
        "sinceTime=yesterday",
    ] {
        let (code, message) = log_error(&api, &format!("{base}?{query}")).await;
        assert_eq!(code, 400, "{query}: {message}");
    }
    // The largest values are valid: they reach the agent (here: no credentials to call it).
    let (code, message) = log_error(
        &api,
        &format!("{base}?sinceSeconds=9223372036854775807&tailLines=9223372036854775807&limitBytes=9223372036854775807"),
    )
    .await;
    assert_eq!(code, 503, "{message}");
}

/// What the fake agent saw and how it answers.
struct Agent {
    port: u16,
    /// Path and query of each request.
    seen: Arc<Mutex<Vec<String>>>,
    /// Feeds the streamed body of the next `/containerLogs/…/app` request.
    feed: mpsc::UnboundedSender<Bytes>,
}

/// A TLS server on 127.0.0.1 requiring client certificates of `ca_pem`. The first
/// `/containerLogs/default/web/app` streams what is fed; anything else answers a 400 `Status`.
async fn agent(ca_pem: &str) -> Agent {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = root_store(ca_pem);
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let serving = rcgen::generate_simple_self_signed(vec!["node".to_owned()]).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![serving.cert.der().clone()],
            PrivateKeyDer::Pkcs8(serving.signing_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (feed, fed) = mpsc::unbounded_channel::<Bytes>();
    let fed = Arc::new(tokio::sync::Mutex::new(Some(fed)));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let log = log.clone();
            let fed = fed.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let log = log.clone();
                let fed = fed.clone();
                async move {
                    let target = request.uri().to_string();
                    log.lock().push(target.clone());
                    let stream = if target.starts_with("/containerLogs/default/web/app?") {
                        fed.lock().await.take()
                    } else {
                        None
                    };
                    let body = if let Some(rx) = stream {
                        let chunks = futures::stream::unfold(rx, |mut rx| async move {
                            rx.recv()
                                .await
                                .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
                        });
                        Response::new(StreamBody::new(chunks).boxed())
                    } else {
                        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": "previous terminated container \"other\" in pod \"web\" not found",
                            "reason": "BadRequest", "code": 400});
                        let mut r = Response::new(
                            http_body_util::Full::new(Bytes::from(status.to_string()))
                                .map_err(|never| match never {})
                                .boxed(),
                        );
                        *r.status_mut() = StatusCode::BAD_REQUEST;
                        r
                    };
                    Ok::<_, Infallible>(body)
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Agent { port, seen, feed }
}

async fn node_at(api: &Api, name: &str, port: u16) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    let (status, _) = json_of(call(api, "POST", "/api/v1/nodes", node).await).await;
    assert_eq!(status, StatusCode::CREATED);
    let patch = json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }});
    let request = Request::builder()
        .method("PATCH")
        .uri(format!("/api/v1/nodes/{name}/status"))
        .header("content-type", "application/merge-patch+json")
        .body(Bytes::from(patch.to_string()))
        .unwrap();
    let (status, body) = json_of(api.handle(request).await).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn log_should_stream_the_agents_answer_over_mutual_tls() {
    let ca = TestCa::new();
    let agent = agent(ca.certificate_pem()).await;
    let api = api().await;
    let client = ca.client_identity();
    assert!(api.set_node_client(NodeClient::new(&client.certificate_pem, &client.key_pem).unwrap()));
    node_at(&api, "n1", agent.port).await;
    let uid = create_pod(&api, "web", &["app"], Some("n1")).await;

    let response = call(
        &api,
        "GET",
        "/api/v1/namespaces/default/pods/web/log?follow=true&tailLines=5&sinceTime=2026-01-01T00%3A00%3A00Z&pretty=true",
        Value::Null,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/plain");
    let mut body = response.into_body();
    // Each chunk arrives before the agent produces the next: the body streams.
    for line in ["line 1\n", "line 2\n"] {
        agent.feed.send(Bytes::from(line)).unwrap();
        let frame = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("a chunk within 30s")
            .expect("the body goes on")
            .expect("no error");
        assert_eq!(frame.into_data().unwrap(), Bytes::from(line));
    }
    drop(agent.feed);
    assert!(tokio::time::timeout(Duration::from_secs(30), body.frame())
        .await
        .expect("ends")
        .is_none());
    let seen = agent.seen.lock().clone();
    assert_eq!(
        seen,
        vec![format!(
            "/containerLogs/default/web/app?follow=true&tailLines=5&sinceTime=2026-01-01T00%3A00%3A00Z&podUID={uid}"
        )]
    );

    // The agent's errors come back as ours.
    let (code, message) = log_error(
        &api,
        "/api/v1/namespaces/default/pods/web/log?container=app&previous=true",
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        message,
        "previous terminated container \"other\" in pod \"web\" not found"
    );
}

#[tokio::test]
async fn log_should_fail_clearly_when_the_agent_refuses_the_certificate() {
    let ca = TestCa::new();
    let agent = agent(ca.certificate_pem()).await;
    let api = api().await;
    // A certificate from another CA.
    let stranger = TestCa::new().client_identity();
    api.set_node_client(NodeClient::new(&stranger.certificate_pem, &stranger.key_pem).unwrap());
    node_at(&api, "n1", agent.port).await;
    create_pod(&api, "web", &["app"], Some("n1")).await;
    let (code, message) = log_error(&api, "/api/v1/namespaces/default/pods/web/log").await;
    assert_eq!(code, 500, "{message}");
    assert!(
        message.contains("calling the node agent at 127.0.0.1"),
        "{message}"
    );
    assert!(agent.seen.lock().is_empty());
}
