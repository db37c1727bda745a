//! The upgrade proxy through the real transport (TLS, HTTP/1.1 upgrades) to a fake agent
//! (`agent.rs`): `101` and bytes both ways, 16 MiB intact, the agent's request as the contract
//! says, a refusal relayed verbatim, upgraded connections ended by shutdown, and kubectl's
//! WebSocket → SPDY fallback arriving over HTTP/1.1 both times.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::json;
use setpoint_apiserver::{serve, Api, RunningServer, TransportConfig};
use setpoint_testenv::tls::client_config;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::agent::{self, FakeAgent, REFUSAL};
use super::{create_pod, set_phase};
use crate::api_errors::{api, call, JSON};

/// The API server on the transport, a fake agent it reaches with its own admin certificate,
/// node `n1` pointing at the agent, and pod `web` (container `app`) on `n1`.
struct Cluster {
    server: RunningServer,
    api: Arc<Api>,
    agent: FakeAgent,
    uid: String,
    _data: tempfile::TempDir,
}

async fn cluster(grace: Duration) -> Cluster {
    let api = api().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = TransportConfig::new(data.path(), "127.0.0.1:0".parse().unwrap());
    config.shutdown_grace = grace;
    let server = serve(config, api.clone(), CancellationToken::new())
        .await
        .unwrap();
    let agent = agent::start(server.pki().ca_certificate_pem()).await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let created = call(&api, "POST", "/api/v1/nodes", JSON, &node.to_string()).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let status = json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": agent.port}},
    }});
    let patched = call(
        &api,
        "PATCH",
        "/api/v1/nodes/n1/status",
        "application/merge-patch+json",
        &status.to_string(),
    )
    .await;
    assert_eq!(patched.0, StatusCode::OK, "{}", patched.1);
    let uid = create_pod(&api, "web", &["app"], Some("n1")).await;
    set_phase(&api, "web", "Running").await;
    Cluster {
        server,
        api,
        agent,
        uid,
        _data: data,
    }
}

impl Cluster {
    /// Sends an upgrade request (`Upgrade: upgrade`) for `uri` on a new HTTP/1.1 connection.
    async fn upgrade(&self, method: &str, uri: &str, upgrade: &str) -> Response<Incoming> {
        let config = client_config(
            self.server.pki().ca_certificate_pem(),
            None,
            &[b"http/1.1"],
            &[&rustls::version::TLS13],
        );
        let address = self.server.local_addr();
        let tcp = TcpStream::connect(address).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(ServerName::IpAddress(address.ip().into()), tcp)
            .await
            .unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(connection.with_upgrades());
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, "127.0.0.1")
            .header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.server.pki().admin_token()),
            )
            .header(header::CONNECTION, "Upgrade")
            .header(header::UPGRADE, upgrade)
            .header("X-Stream-Protocol-Version", "v4.channel.k8s.io")
            .header("X-Stream-Protocol-Version", "v3.channel.k8s.io")
            .body(Empty::<Bytes>::new())
            .unwrap();
        sender.send_request(request).await.unwrap()
    }
}

/// The upgraded connection of a `101` answer.
async fn upgraded(response: Response<Incoming>) -> TokioIo<hyper::upgrade::Upgraded> {
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    TokioIo::new(hyper::upgrade::on(response).await.unwrap())
}

/// Byte `i` of the large transfer.
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 13)) as u8
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_should_splice_bytes_both_ways_through_the_server() {
    let cluster = cluster(Duration::from_secs(5)).await;
    let query = "command=sh&command=-c&command=echo%20hi&stdin=true&stdout=true";
    for (method, protocol) in [("POST", "SPDY/3.1"), ("GET", "websocket")] {
        let response = cluster
            .upgrade(
                method,
                &format!("/api/v1/namespaces/default/pods/web/exec?{query}"),
                protocol,
            )
            .await;
        // The agent's answer, as the agent gave it.
        assert_eq!(response.headers()[header::UPGRADE], protocol);
        assert_eq!(
            response.headers()["x-stream-protocol-version"],
            "v4.channel.k8s.io"
        );
        let mut io = upgraded(response).await;
        io.write_all(b"hello").await.unwrap();
        let mut echo = [0_u8; 5];
        io.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"hello");
        let seen = cluster.agent.seen.lock().last().cloned().unwrap();
        assert_eq!(seen.method.as_str(), method);
        assert_eq!(seen.version, Version::HTTP_11);
        assert_eq!(
            seen.target,
            format!("/exec/default/web/{}/app?{query}", cluster.uid)
        );
        assert_eq!(seen.headers[header::UPGRADE], protocol);
        assert_eq!(
            seen.headers
                .get_all("x-stream-protocol-version")
                .iter()
                .count(),
            2
        );
        assert!(!seen.headers.contains_key(header::AUTHORIZATION));
    }

    // An open stream is a long-running request until it ends.
    let open = |api: &Api| -> i64 {
        api.telemetry()
            .longrunning
            .iter()
            .filter(|(labels, _)| {
                labels.contains(&("verb", "CONNECT".to_owned()))
                    && labels.contains(&("subresource", "exec".to_owned()))
            })
            .map(|(_, n)| *n)
            .sum()
    };
    let response = cluster
        .upgrade(
            "GET",
            "/api/v1/namespaces/default/pods/web/exec?command=sh",
            "websocket",
        )
        .await;
    let mut io = upgraded(response).await;
    io.write_all(b"!").await.unwrap();
    let mut one = [0_u8; 1];
    io.read_exact(&mut one).await.unwrap();
    assert!(open(&cluster.api) >= 1, "the open stream is not counted");
    io.shutdown().await.unwrap();
    assert_eq!(io.read(&mut one).await.unwrap(), 0);
    drop(io);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while open(&cluster.api) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "ended streams are still counted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // 16 MiB each way, written and read at once; the client's half-close reaches the agent,
    // whose own half-close comes back once it has echoed everything.
    const SIZE: usize = 16 * 1024 * 1024;
    let response = cluster
        .upgrade(
            "POST",
            "/api/v1/namespaces/default/pods/web/exec?command=cat&stdin=true",
            "SPDY/3.1",
        )
        .await;
    let (mut reader, mut writer) = tokio::io::split(upgraded(response).await);
    let write = tokio::spawn(async move {
        let mut chunk = vec![0_u8; 64 * 1024];
        let mut at = 0;
        while at < SIZE {
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = pattern(at + i);
            }
            writer.write_all(&chunk).await.unwrap();
            at += chunk.len();
        }
        writer.shutdown().await.unwrap();
    });
    let mut received = 0_usize;
    let mut buffer = vec![0_u8; 256 * 1024];
    let read = async {
        loop {
            let n = reader.read(&mut buffer).await.unwrap();
            if n == 0 {
                break;
            }
            for (i, b) in buffer[..n].iter().enumerate() {
                assert_eq!(*b, pattern(received + i), "byte {}", received + i);
            }
            received += n;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read)
        .await
        .expect("the echo ends within 120 s");
    write.await.unwrap();
    assert_eq!(received, SIZE);

    // Counted as kube-apiserver counts connect requests.
    let counted = cluster
        .api
        .telemetry()
        .requests
        .iter()
        .any(|(labels, code, _)| {
            *code == 101
                && labels.contains(&("verb", "CONNECT".to_owned()))
                && labels.contains(&("subresource", "exec".to_owned()))
        });
    assert!(
        counted,
        "no CONNECT pods/exec request with code 101 counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_refusal_should_be_relayed_verbatim() {
    let cluster = cluster(Duration::from_secs(5)).await;
    let response = cluster
        .upgrade(
            "GET",
            "/api/v1/namespaces/default/pods/web/attach?stdout=true",
            "websocket",
        )
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(response.headers()["x-fake-agent"], "refused");
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, Bytes::from_static(REFUSAL.as_bytes()));
    let seen = cluster.agent.seen.lock().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].target,
        format!("/attach/default/web/{}/app?stdout=true", cluster.uid)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_should_end_upgraded_connections_after_the_grace_period() {
    let cluster = cluster(Duration::from_millis(300)).await;
    let response = cluster
        .upgrade(
            "POST",
            "/api/v1/namespaces/default/pods/web/exec?command=sh",
            "SPDY/3.1",
        )
        .await;
    let mut io = upgraded(response).await;
    io.write_all(b"x").await.unwrap();
    let mut one = [0_u8; 1];
    io.read_exact(&mut one).await.unwrap();
    let Cluster { server, .. } = cluster;
    tokio::time::timeout(Duration::from_secs(30), server.shutdown())
        .await
        .expect("the server stops within 30 s despite the open stream")
        .unwrap();
    // The spliced connection is gone: end of stream or an error, not a hang.
    let read = tokio::time::timeout(Duration::from_secs(30), io.read(&mut one))
        .await
        .expect("the client's side ends");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

/// Runs kubectl with `kubeconfig` and a scratch HOME; returns its exit success and stderr.
async fn kubectl(kubeconfig: &Path, home: &Path, args: &[&str]) -> (bool, String) {
    let mut command = tokio::process::Command::new(setpoint_testenv::kubectl::kubectl_program());
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBECTL_REMOTE_COMMAND_WEBSOCKETS")
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("kubectl finished within 60 s")
        .expect("kubectl is on PATH");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_should_reach_the_agent_over_http1_and_fall_back_to_spdy() {
    let cluster = cluster(Duration::from_secs(5)).await;
    let home = tempfile::tempdir().unwrap();
    let (ok, stderr) = kubectl(
        cluster.server.kubeconfig_path(),
        home.path(),
        &["attach", "web", "-c", "app"],
    )
    .await;
    assert!(!ok, "the fake agent refuses attach");
    assert!(
        stderr.contains(r#"unable to upgrade connection: container not found (\"app\")"#)
            || stderr.contains(r#"unable to upgrade connection: container not found ("app")"#),
        "{stderr}"
    );
    // A WebSocket GET first, then the SPDY POST: both reached the agent as HTTP/1.1 upgrade
    // requests (an HTTP/2 request could not have been upgraded: the server would have said
    // `Upgrade request required` without calling the agent).
    let seen = cluster.agent.seen.lock().clone();
    let attempts: Vec<(String, String, Version)> = seen
        .iter()
        .map(|s| {
            (
                s.method.to_string(),
                s.headers
                    .get(header::UPGRADE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_ascii_lowercase(),
                s.version,
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            ("GET".to_owned(), "websocket".to_owned(), Version::HTTP_11),
            ("POST".to_owned(), "spdy/3.1".to_owned(), Version::HTTP_11),
        ],
        "{seen:?}"
    );
    assert!(
        seen[0].headers.contains_key("sec-websocket-key"),
        "{:?}",
        seen[0].headers
    );
}
