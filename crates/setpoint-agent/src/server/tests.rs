//! Tests of the endpoint over real TLS on 127.0.0.1: who may connect, and what it serves.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use setpoint_testenv::tls::{client_config_for_any_server, Identity, TestCa};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::serve;
use crate::logs::{container_log, pod_dir, LogStream, LogWriter};

/// Sends `GET path` as HTTP/1.0 (so the body is not chunked) and returns the whole response,
/// or the error that stopped it.
async fn get(addr: SocketAddr, identity: Option<Identity>, path: &str) -> std::io::Result<String> {
    let config = client_config_for_any_server(identity.as_ref());
    let tcp = TcpStream::connect(addr).await?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await?;
    tls.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    tls.read_to_end(&mut response).await?;
    Ok(String::from_utf8_lossy(&response).into_owned())
}

async fn start(root: &Path, ca: &TestCa) -> (SocketAddr, CancellationToken) {
    let shutdown = CancellationToken::new();
    let addr = serve(
        "127.0.0.1:0".parse().expect("addr"),
        ca.certificate_pem(),
        root.to_owned(),
        crate::metrics::Sampler::new("n", root.to_owned(), std::time::Duration::from_secs(10)),
        Vec::new(),
        shutdown.clone(),
    )
    .await
    .expect("serve");
    (addr, shutdown)
}

fn write_log(root: &Path, uid: &str, lines: &[u8]) {
    let dir = pod_dir(root, "default", "web", uid);
    let mut writer = LogWriter::create(&container_log(&dir, "app", 0)).expect("log");
    writer.write(LogStream::Stdout, lines).expect("write");
}

#[tokio::test]
async fn endpoint_should_serve_only_the_api_servers_certificate_from_the_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_log(dir.path(), "u1", b"secret\n");
    let ca = TestCa::new();
    let (addr, shutdown) = start(dir.path(), &ca).await;
    let path = "/containerLogs/default/web/app?podUID=u1";

    let anonymous = get(addr, None, path).await;
    assert!(
        anonymous.is_err(),
        "served without a client certificate: {anonymous:?}"
    );
    let stranger = get(addr, Some(TestCa::new().client_identity()), path).await;
    assert!(
        stranger.is_err(),
        "served to a certificate from another CA: {stranger:?}"
    );
    // A user the cluster CA signed, not in system:masters: the API server alone may call.
    for (user, group) in [
        ("jane", Some("dev")),
        ("system:node:other", Some("system:nodes")),
    ] {
        let refused = get(addr, Some(ca.client_identity_as(user, group)), path)
            .await
            .expect("answered");
        assert!(refused.starts_with("HTTP/1.0 403"), "{refused}");
        assert!(refused.contains("\"reason\":\"Forbidden\""), "{refused}");
        assert!(
            refused.contains(&format!("user \\\"{user}\\\" may not call the node agent")),
            "{refused}"
        );
        assert!(!refused.contains("secret"), "{refused}");
    }
    let member = get(addr, Some(ca.client_identity()), path)
        .await
        .expect("served");
    assert!(member.starts_with("HTTP/1.0 200"), "{member}");
    assert!(
        member
            .to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{member}"
    );
    assert!(member.ends_with("\r\n\r\nsecret\n"), "{member}");
    shutdown.cancel();
}

#[tokio::test]
async fn endpoint_should_pass_options_and_find_the_pod_without_its_uid() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_log(dir.path(), "u1", b"one\ntwo\nthree\n");
    let ca = TestCa::new();
    let (addr, shutdown) = start(dir.path(), &ca).await;
    let response = get(
        addr,
        Some(ca.client_identity()),
        "/containerLogs/default/web/app?tailLines=2&limitBytes=6",
    )
    .await
    .expect("served");
    assert!(response.ends_with("\r\n\r\ntwo\nth"), "{response}");
    shutdown.cancel();
}

#[tokio::test]
async fn endpoint_should_answer_errors_as_status_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_log(dir.path(), "u1", b"one\n");
    let ca = TestCa::new();
    let (addr, shutdown) = start(dir.path(), &ca).await;
    let client = || Some(ca.client_identity());

    let response = get(addr, client(), "/containerLogs/default/web/other?podUID=u1")
        .await
        .expect("served");
    assert!(response.starts_with("HTTP/1.0 400"), "{response}");
    let body = response.split("\r\n\r\n").nth(1).expect("a body");
    let status: serde_json::Value = serde_json::from_str(body).expect("a Status");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(status["code"], 400);
    assert_eq!(
        status["message"],
        "container \"other\" in pod \"web\" is waiting to start: ContainerCreating"
    );

    let response = get(
        addr,
        client(),
        "/containerLogs/default/web/app?previous=true",
    )
    .await
    .expect("served");
    assert!(
        response.contains("previous terminated container \\\"app\\\" in pod \\\"web\\\" not found"),
        "{response}"
    );

    let response = get(addr, client(), "/containerLogs/default/web/app?tailLines=x")
        .await
        .expect("served");
    assert!(response.starts_with("HTTP/1.0 400"), "{response}");

    let response = get(addr, client(), "/exec/default/web/app")
        .await
        .expect("served");
    assert!(response.starts_with("HTTP/1.0 404"), "{response}");
    shutdown.cancel();
}

#[tokio::test]
async fn endpoint_should_answer_extreme_log_options_without_panicking() {
    // Regression (issue 14.4): sinceSeconds=9223372036854775807 panicked the log handler;
    // tailLines=-1 and sinceSeconds with sinceTime were accepted.
    let dir = tempfile::tempdir().expect("tempdir");
    write_log(dir.path(), "u1", b"one\ntwo\n");
    let ca = TestCa::new();
    let (addr, shutdown) = start(dir.path(), &ca).await;
    let client = || Some(ca.client_identity());
    let response = get(
        addr,
        client(),
        "/containerLogs/default/web/app?sinceSeconds=9223372036854775807&tailLines=9223372036854775807&limitBytes=9223372036854775807",
    )
    .await
    .expect("served");
    assert!(response.starts_with("HTTP/1.0 200"), "{response}");
    assert!(response.ends_with("\r\n\r\none\ntwo\n"), "{response}");
    for query in [
        "tailLines=-1",
        "limitBytes=0",
        "sinceSeconds=-9223372036854775808",
        "sinceSeconds=1&sinceTime=2026-01-02T03%3A04%3A05Z",
    ] {
        let response = get(
            addr,
            client(),
            &format!("/containerLogs/default/web/app?{query}"),
        )
        .await
        .expect("served");
        assert!(response.starts_with("HTTP/1.0 422"), "{query}: {response}");
        assert!(
            response.contains("\"reason\":\"Invalid\""),
            "{query}: {response}"
        );
    }
    shutdown.cancel();
}

#[tokio::test]
async fn serve_should_refuse_a_ca_that_is_not_pem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = serve(
        "127.0.0.1:0".parse().expect("addr"),
        "not a certificate",
        dir.path().to_owned(),
        crate::metrics::Sampler::new(
            "n",
            dir.path().to_owned(),
            std::time::Duration::from_secs(10),
        ),
        Vec::new(),
        CancellationToken::new(),
    )
    .await
    .expect_err("no CA");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn metrics_should_be_unavailable_until_two_samples_then_report_the_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new();
    let (addr, shutdown) = start(dir.path(), &ca).await;
    let first = get(addr, Some(ca.client_identity()), "/metrics/resource")
        .await
        .expect("served");
    assert!(first.starts_with("HTTP/1.0 503"), "{first}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let body = loop {
        let response = get(addr, Some(ca.client_identity()), "/metrics/resource")
            .await
            .expect("served");
        if let Some(body) = response
            .starts_with("HTTP/1.0 200")
            .then(|| response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()))
            .flatten()
        {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "{response}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let report: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(report["node"]["name"], "n", "{report}");
    assert!(
        report["node"]["memoryWorkingSetBytes"].as_u64() > Some(0),
        "{report}"
    );
    assert!(
        report["node"]["windowMillis"].as_u64() >= Some(500),
        "{report}"
    );
    assert_eq!(report["pods"], serde_json::json!([]), "{report}");
    shutdown.cancel();
}
