//! What the agent's integration tests share: an in-process API server with an agent on it
//! (killing every process its pods left when dropped), a CA and a client configuration for the
//! agent's HTTPS endpoint (from the test kit), and a plain HTTPS GET against it.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // shared test support; each file uses part of it

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use kube::api::PostParams;
use kube::Api;
use rustls::pki_types::ServerName;
use serde_json::{json, Value};
use setpoint_agent::AgentConfig;
use setpoint_runtime::Client;
use setpoint_testenv::tls::{client_config_for_any_server, TestCa};
use setpoint_testenv::TestEnv;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::{sleep, Instant};
use tokio_util::sync::CancellationToken;

pub const NS: &str = "default";

/// An API server and an agent on it; kills what the pods left when dropped.
pub struct Harness {
    /// The agent's node.
    pub node: &'static str,
    _env: TestEnv,
    pub client: Client,
    root: tempfile::TempDir,
    shutdown: CancellationToken,
}

impl Harness {
    /// Starts a test API server and an agent for `node` trusting `client_ca_pem`.
    pub async fn start(
        node: &'static str,
        client_ca_pem: String,
        metrics_interval: Duration,
    ) -> Harness {
        let env = TestEnv::start().await.expect("test API server");
        let client = env.client();
        let root = tempfile::tempdir().expect("a root directory");
        let shutdown = CancellationToken::new();
        let config = AgentConfig {
            node_name: node.to_owned(),
            root_dir: root.path().to_owned(),
            node_ip: "127.0.0.1".parse().expect("an IP"),
            listen: "127.0.0.1:0".parse().expect("an address"),
            client_ca_pem,
            shim: vec![env!("CARGO_BIN_EXE_setpoint-agent-shim").into()],
            capacity_override: BTreeMap::new(),
            metrics_interval,
            container_tracking: setpoint_agent::ContainerTracking::Auto,
            mount_mode: setpoint_agent::MountMode::Auto,
            services: setpoint_agent::ServicesConfig::default(),
            pod_network: setpoint_agent::PodNetworkMode::Host,
        };
        tokio::spawn(setpoint_agent::run(
            client.clone(),
            config,
            shutdown.clone(),
        ));
        Harness {
            node,
            _env: env,
            client,
            root,
            shutdown,
        }
    }

    pub fn pods(&self) -> Api<Pod> {
        self.client.namespaced_api::<Pod>(NS)
    }

    /// Creates pod `name` on this node with `container` (named `app`), and `restartPolicy` if
    /// one is given.
    pub async fn create_pod(&self, name: &str, container: Value, restart_policy: Option<&str>) {
        let mut container = container;
        container["name"] = json!("app");
        container["image"] = json!("busybox");
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": self.node, "terminationGracePeriodSeconds": 1, "containers": [container]},
        }))
        .expect("a pod");
        if let Some(policy) = restart_policy {
            pod.spec.as_mut().expect("a spec").restart_policy = Some(policy.to_owned());
        }
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
    }

    /// Waits until `check` accepts the pod's first container status; panics after 60 s.
    pub async fn wait_container(
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
        // Stops what runs and removes the root's cgroups; then kills by the records, in case.
        setpoint_agent::cleanup(self.root.path(), Duration::ZERO);
        kill_everything_under(self.root.path());
    }
}

/// Kills every shim and container process group the run records under `root` name.
pub fn kill_everything_under(root: &Path) {
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

/// A CA (its PEM) and a client configuration presenting a certificate it issued, accepting
/// the agent's self-signed certificate (as the API server does).
pub fn ca_and_client() -> (String, rustls::ClientConfig) {
    let ca = TestCa::new();
    let config = client_config_for_any_server(Some(&ca.client_identity()));
    (ca.certificate_pem().to_owned(), config)
}

/// The agent's endpoint port, once its Node publishes it.
pub async fn agent_port(client: &Client, node: &str) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let node = client.api::<Node>().get_opt(node).await.expect("get node");
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
pub async fn get(port: u16, config: &rustls::ClientConfig, path: &str) -> (u16, String) {
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

/// A CA's PEM, for an agent whose endpoint the test does not call.
pub fn test_ca_pem() -> String {
    TestCa::new().certificate_pem().to_owned()
}

/// Whether the container is running.
pub fn running(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_some_and(|s| s.running.is_some())
}
