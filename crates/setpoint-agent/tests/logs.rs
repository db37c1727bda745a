//! Container logs through the whole agent, against a real in-process API server: a pod's
//! output, written by the container shim, read over the agent's HTTPS endpoint with a client
//! certificate of the cluster CA — stdout and stderr in the log, a line without its newline
//! kept whole, and `follow` ending by itself once the container has exited.
//!
//! (The log format, tail/since/limit/timestamps/previous and the endpoint's mutual TLS are
//! unit-tested in `src/logs/` and `src/server/`; `kubectl logs` end to end is in
//! `crates/setpoint/tests/logs_kubectl.rs`.)

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use kube::api::PostParams;
use kube::Api;
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::json;
use setpoint_agent::AgentConfig;
use setpoint_runtime::Client;
use setpoint_testenv::TestEnv;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::{sleep, Instant};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const NODE: &str = "logs-node";

/// An API server and an agent on it; kills what the pods left when dropped.
struct Harness {
    _env: TestEnv,
    client: Client,
    root: tempfile::TempDir,
    shutdown: CancellationToken,
}

impl Harness {
    async fn start(client_ca_pem: String) -> Harness {
        let env = TestEnv::start().await.expect("test API server");
        let client = env.client();
        let root = tempfile::tempdir().expect("a root directory");
        let shutdown = CancellationToken::new();
        let config = AgentConfig {
            node_name: NODE.to_owned(),
            root_dir: root.path().to_owned(),
            node_ip: "127.0.0.1".parse().expect("an IP"),
            listen: "127.0.0.1:0".parse().expect("an address"),
            client_ca_pem,
            shim: vec![env!("CARGO_BIN_EXE_setpoint-agent-shim").into()],
            capacity_override: BTreeMap::new(),
            metrics_interval: setpoint_agent::DEFAULT_METRICS_INTERVAL,
        };
        tokio::spawn(setpoint_agent::run(
            client.clone(),
            config,
            shutdown.clone(),
        ));
        Harness {
            _env: env,
            client,
            root,
            shutdown,
        }
    }

    fn pods(&self) -> Api<Pod> {
        self.client.namespaced_api::<Pod>(NS)
    }

    async fn create_pod(&self, name: &str, container: serde_json::Value) {
        let mut container = container;
        container["name"] = json!("app");
        container["image"] = json!("busybox");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": NODE, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container]},
        }))
        .expect("a pod");
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
    }

    /// Waits until `check` accepts the pod's first container status; panics after 60 s.
    async fn wait_container(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Pod, &ContainerStatus) -> bool,
    ) -> Pod {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pod = self.pods().get(name).await.expect("get pod");
            let status = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first());
            if status.is_some_and(|c| check(&pod, c)) {
                return pod;
            }
            assert!(
                Instant::now() < deadline,
                "pod {name}: timed out waiting for {what}; status: {}",
                serde_json::to_string_pretty(&pod.status).unwrap_or_default()
            );
            sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
        kill_everything_under(self.root.path());
    }
}

/// Kills every shim and container process group the run records under `root` name.
fn kill_everything_under(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            kill_everything_under(&path);
            continue;
        }
        if !path.to_string_lossy().ends_with(".run.json") {
            continue;
        }
        let Some(record) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        for (key, group) in [("shimPid", false), ("containerPid", true)] {
            if let Some(pid) = record[key].as_i64() {
                let target = if group {
                    format!("-{pid}")
                } else {
                    pid.to_string()
                };
                let _ = std::process::Command::new("kill")
                    .args(["-9", "--", &target])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
    }
}

/// Accepts the agent's self-signed certificate (as the API server does).
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A CA (its PEM) and a client configuration presenting a certificate it issued.
fn ca_and_client() -> (String, rustls::ClientConfig) {
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca_params.self_signed(&ca_key).expect("ca").pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).expect("client cert");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        .with_client_auth_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("client auth");
    (ca_pem, config)
}

/// The agent's endpoint port, once its Node publishes it.
async fn agent_port(client: &Client) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let node = client.api::<Node>().get_opt(NODE).await.expect("get node");
        let port = node
            .and_then(|n| n.status)
            .and_then(|s| s.daemon_endpoints)
            .and_then(|d| d.kubelet_endpoint)
            .map(|e| e.port)
            .filter(|p| *p > 0);
        if let Some(port) = port {
            return u16::try_from(port).expect("a port");
        }
        assert!(
            Instant::now() < deadline,
            "the node never published its agent port"
        );
        sleep(Duration::from_millis(100)).await;
    }
}

/// GETs `path` from the agent (HTTP/1.0: an unchunked body ending with the connection) and
/// returns the status code and the body.
async fn get(port: u16, config: &rustls::ClientConfig, path: &str) -> (u16, String) {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config.clone()))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("handshake");
    tls.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .expect("request");
    let mut response = Vec::new();
    tls.read_to_end(&mut response).await.expect("response");
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followed_log_should_hold_the_output_and_end_when_the_container_exits() {
    let (ca_pem, client_config) = ca_and_client();
    let h = Harness::start(ca_pem).await;
    let port = agent_port(&h.client).await;
    let work = tempfile::tempdir().expect("tempdir");
    let go = work.path().join("go");
    h.create_pod(
        "talk",
        json!({"command": ["sh", "-c", format!(
            "echo out 1; echo err 1 >&2; printf 'no newline '; while [ ! -f {} ]; do sleep 0.1; done; echo out 2",
            go.display()
        )]}),
    )
    .await;
    h.wait_container("talk", "running", |_, c| running(c)).await;
    let uid = h
        .pods()
        .get("talk")
        .await
        .expect("pod")
        .metadata
        .uid
        .expect("a uid");

    // Follow: started while the container still runs, so it can only end once the exit record
    // is written — after the `go` file lets the container finish.
    let follow = {
        let config = client_config.clone();
        let path = format!("/containerLogs/{NS}/talk/app?follow=true&podUID={uid}");
        tokio::spawn(async move { get(port, &config, &path).await })
    };
    sleep(Duration::from_millis(500)).await;
    assert!(
        !follow.is_finished(),
        "the follow ended while the container ran"
    );
    std::fs::write(&go, "").expect("let it finish");
    let (code, body) = tokio::time::timeout(Duration::from_secs(60), follow)
        .await
        .expect("the follow ends after the container exits")
        .expect("the follow task");
    assert_eq!(code, 200, "{body}");
    let stdout: Vec<&str> = body.lines().filter(|l| !l.starts_with("err")).collect();
    assert_eq!(stdout, vec!["out 1", "no newline out 2"], "{body}");
    assert!(
        body.lines().any(|l| l == "err 1"),
        "stderr is in the log: {body}"
    );

    // After the exit: the same log without follow; a container that does not exist is
    // waiting to start.
    let (code, again) = get(
        port,
        &client_config,
        &format!("/containerLogs/{NS}/talk/app?podUID={uid}"),
    )
    .await;
    assert_eq!((code, again.as_str()), (200, body.as_str()));
    let (code, error) = get(
        port,
        &client_config,
        &format!("/containerLogs/{NS}/talk/nope?podUID={uid}"),
    )
    .await;
    assert_eq!(code, 400, "{error}");
    assert!(
        error.contains("waiting to start: ContainerCreating"),
        "{error}"
    );
}

fn running(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_some_and(|s| s.running.is_some())
}
