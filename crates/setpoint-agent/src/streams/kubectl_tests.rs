//! Interop with real kubectl: a minimal HTTP API server (discovery, one Running pod, and the
//! `exec`/`portforward` subresources answered by [`serve_remote_command`] and
//! [`serve_port_forward`]) on loopback, driven by kubectl 1.32 (WebSocket v5 exec, SPDY
//! fallback, tunnelled port-forward, plain SPDY port-forward) and kubectl 1.27 (SPDY exec).
//! Skipped when kubectl is not installed. The same server, with raw HTTP/1.1, checks the
//! `101` headers and the `Status` refusals.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

use super::testkit::{echo_exit_3, echo_server, loopback};
use super::{serve_port_forward, serve_remote_command, Body, StreamFlags};

const API: &str = r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}"#;
const APIS: &str = r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#;
const V1: &str = r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"],"shortNames":["po"]},{"name":"pods/exec","singularName":"","namespaced":true,"kind":"PodExecOptions","verbs":["create","get"]},{"name":"pods/portforward","singularName":"","namespaced":true,"kind":"PodPortForwardOptions","verbs":["create","get"]}]}"#;
const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","uid":"u1"},"spec":{"containers":[{"name":"c","image":"x"}]},"status":{"phase":"Running"}}"#;

fn json(body: &'static str, code: u16) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from_static(body.as_bytes()))
            .map_err(|n| match n {})
            .boxed(),
    );
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap();
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    response
}

/// The `Upgrade` header of each exec/portforward request the server saw, in order.
type Upgrades = Arc<Mutex<Vec<String>>>;

async fn handle(request: Request<Incoming>, upgrades: Upgrades) -> Response<Body> {
    let path = request.uri().path().to_owned();
    if path.ends_with("/exec") || path.ends_with("/portforward") {
        let upgrade = request
            .headers()
            .get("upgrade")
            .and_then(|v| v.to_str().ok());
        upgrades
            .lock()
            .push(upgrade.unwrap_or_default().to_ascii_lowercase());
    }
    let query = request.uri().query().unwrap_or("").to_owned();
    let yes = |name: &str| {
        setpoint_core::query_pairs(&query)
            .iter()
            .any(|(k, v)| k == name && (v == "true" || v == "1"))
    };
    match path.as_str() {
        "/api" => json(API, 200),
        "/apis" => json(APIS, 200),
        "/api/v1" => json(V1, 200),
        "/api/v1/namespaces/default/pods/p" => json(POD, 200),
        "/api/v1/namespaces/default/pods/p/exec" => {
            let flags = StreamFlags {
                stdin: yes("stdin"),
                stdout: yes("stdout"),
                stderr: yes("stderr"),
                tty: yes("tty"),
            };
            serve_remote_command(request, flags, echo_exit_3)
        }
        "/api/v1/namespaces/default/pods/p/portforward" => serve_port_forward(request, loopback()),
        _ => json(
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
            404,
        ),
    }
}

async fn api_server() -> (SocketAddr, Upgrades) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let upgrades = Upgrades::default();
    let seen = upgrades.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let seen = seen.clone();
                    async move { Ok::<_, std::convert::Infallible>(handle(request, seen).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    (addr, upgrades)
}

/// `kubectl.1.<minor>` beside the kubectl on the PATH (1.32 by default), else that one.
fn kubectl(minor: Option<u32>) -> Option<PathBuf> {
    let on_path = which("kubectl")?;
    let dir = std::fs::canonicalize(&on_path).ok()?.parent()?.to_owned();
    let versioned = dir.join(format!("kubectl.1.{}", minor.unwrap_or(32)));
    match (versioned.exists(), minor) {
        (true, _) => Some(versioned),
        (false, None) => Some(on_path),
        (false, Some(_)) => None,
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

fn command(binary: &Path, addr: SocketAddr, env: &[(&str, &str)]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .arg(format!("--server=http://{addr}"))
        .arg("--kubeconfig=/dev/null")
        .env_remove("KUBECONFIG")
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    command
}

/// `echo … | kubectl exec -i p -- cmd`: stdin reaches the command and its end ends it; the
/// output, stderr, and the exit code come back.
/// `upgrade` is the one upgrade the client must have asked for (no fallback).
async fn exec_round_trip(binary: &Path, env: &[(&str, &str)], upgrade: &str) {
    let (addr, upgrades) = api_server().await;
    let mut child = command(binary, addr, env)
        .args(["exec", "-i", "p", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"through kubectl\n").await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("kubectl exec ended")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "through kubectl\n",
        "stderr: {stderr}"
    );
    assert!(stderr.starts_with("err"), "{stderr}");
    assert!(
        stderr.contains("command terminated with exit code 3"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert_eq!(*upgrades.lock(), [upgrade]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_should_work_over_websocket_and_spdy() {
    let Some(current) = kubectl(None) else {
        eprintln!("skipped: kubectl not installed");
        return;
    };
    // kubectl 1.32's default: WebSocket v5.
    exec_round_trip(&current, &[], "websocket").await;
    // Its SPDY path (what it falls back to).
    exec_round_trip(
        &current,
        &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")],
        "spdy/3.1",
    )
    .await;
    // kubectl 1.27 speaks only SPDY.
    if let Some(old) = kubectl(Some(27)) {
        exec_round_trip(&old, &[], "spdy/3.1").await;
    }
}

/// `kubectl port-forward p :PORT` to a TCP echo server; a megabyte goes through.
/// Two connections of `size` bytes echoed, each through the one session kubectl opens with
/// `upgrade`; returns how long each connection's round trip took.
async fn port_forward_round_trip(
    binary: &Path,
    env: &[(&str, &str)],
    upgrade: &str,
    size: usize,
) -> Vec<Duration> {
    let echo = echo_server().await;
    let (addr, upgrades) = api_server().await;
    let mut child = command(binary, addr, env)
        .args(["port-forward", "p", &format!(":{echo}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // "Forwarding from 127.0.0.1:LOCAL -> REMOTE"
    let local = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("kubectl printed its port");
            if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                break rest
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .parse::<u16>()
                    .unwrap();
            }
        }
    })
    .await
    .unwrap();
    let mut took = Vec::new();
    for _ in 0..2 {
        let sent: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
        let start = std::time::Instant::now();
        let conn = tokio::net::TcpStream::connect(("127.0.0.1", local))
            .await
            .unwrap();
        let (mut read, mut write) = conn.into_split();
        let writer = tokio::spawn({
            let sent = sent.clone();
            async move {
                write.write_all(&sent).await.unwrap();
                write
            }
        });
        let mut received = vec![0u8; sent.len()];
        tokio::time::timeout(Duration::from_secs(300), read.read_exact(&mut received))
            .await
            .unwrap()
            .unwrap();
        assert!(received == sent, "the bytes came back changed");
        drop(writer.await.unwrap());
        took.push(start.elapsed());
    }
    child.kill().await.unwrap();
    assert_eq!(*upgrades.lock(), [upgrade]);
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_should_work_tunnelled_and_over_spdy() {
    let Some(current) = kubectl(None) else {
        eprintln!("skipped: kubectl not installed");
        return;
    };
    // kubectl 1.32's default: SPDY in a WebSocket.
    port_forward_round_trip(&current, &[], "websocket", 1 << 20).await;
    port_forward_round_trip(
        &current,
        &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")],
        "spdy/3.1",
        1 << 20,
    )
    .await;
}

/// Throughput through kubectl port-forward (tunnelled, then plain SPDY) to an echo server:
/// `SETPOINT_STREAMS_MIB` MiB (default 256) each way per connection, printed as MB/s each
/// way. A measurement, not a check; run it in release:
/// `cargo test --release -p setpoint-agent --lib kubectl_port_forward_throughput -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run by hand in release"]
async fn kubectl_port_forward_throughput() {
    let Some(current) = kubectl(None) else {
        eprintln!("skipped: kubectl not installed");
        return;
    };
    let mib: usize = std::env::var("SETPOINT_STREAMS_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let size = mib << 20;
    let spdy_env = [("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")];
    for (name, env, upgrade) in [
        ("tunnel", &[][..], "websocket"),
        ("spdy", &spdy_env[..], "spdy/3.1"),
    ] {
        for took in port_forward_round_trip(&current, env, upgrade, size).await {
            let rate = size as f64 / took.as_secs_f64() / 1e6;
            println!(
                "port-forward {name}: {mib} MiB each way in {took:?}: {rate:.0} MB/s each way"
            );
        }
    }
}

/// Sends a raw HTTP/1.1 request head; returns the response head and its body (by
/// `content-length`).
async fn raw(addr: SocketAddr, head: &str) -> String {
    let conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut conn = tokio::io::BufReader::new(conn);
    conn.get_mut().write_all(head.as_bytes()).await.unwrap();
    let mut response = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).await.unwrap();
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        response.push_str(&line);
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body).await.unwrap();
    response.push_str(&String::from_utf8_lossy(&body));
    response
}

#[tokio::test]
async fn upgrades_should_be_refused_with_a_status() {
    let (addr, _) = api_server().await;
    let exec = "/api/v1/namespaces/default/pods/p/exec?command=x&stdout=true";
    let plain = raw(
        addr,
        &format!("GET {exec} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(plain.starts_with("HTTP/1.1 400"), "{plain}");
    assert!(plain.contains("Upgrade request required"), "{plain}");

    let ws = raw(addr, &format!("GET {exec} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v9.channel.k8s.io\r\n\r\n")).await;
    assert!(ws.starts_with("HTTP/1.1 400"), "{ws}");
    assert!(ws.contains("\"reason\":\"BadRequest\""), "{ws}");

    let spdy = raw(addr, &format!("POST {exec} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v9.channel.k8s.io\r\nContent-Length: 0\r\n\r\n")).await;
    assert!(spdy.starts_with("HTTP/1.1 403"), "{spdy}");
    assert!(
        spdy.to_ascii_lowercase()
            .contains("x-accepted-stream-protocol-versions: v4.channel.k8s.io"),
        "{spdy}"
    );

    let none = raw(addr, "GET /api/v1/namespaces/default/pods/p/exec?command=x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").await;
    assert!(
        none.contains("you must specify at least 1 of stdin, stdout, stderr"),
        "{none}"
    );

    let no_ports = raw(addr, "GET /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n").await;
    assert!(no_ports.starts_with("HTTP/1.1 400"), "{no_ports}");

    // Accepted: the 101 carries the RFC 6455 accept key and the chosen subprotocol.
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(format!("GET {exec} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io\r\n\r\n").as_bytes()).await.unwrap();
    let mut head = vec![0u8; 1024];
    let n = conn.read(&mut head).await.unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    assert!(
        head.contains("sec-websocket-protocol: v5.channel.k8s.io"),
        "{head}"
    );
    assert!(head.contains("connection: upgrade"), "{head}");
}

/// The Python `kubernetes` client (`tests/python/streams.py`): exec over WebSocket v5 and
/// port-forward over WebSocket v4 with port prefixes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_should_exec_and_port_forward() {
    let Some(python) = std::env::var_os("SETPOINT_PYTHON") else {
        eprintln!(
            "skipped: set SETPOINT_PYTHON to a Python with the `kubernetes` package (scripts/check does)"
        );
        return;
    };
    let echo = echo_server().await;
    let (addr, upgrades) = api_server().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/streams.py");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script)
            .arg(format!("http://{addr}"))
            .arg(echo.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finished")
    .unwrap();
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(*upgrades.lock(), ["websocket", "websocket"]);
}
