//! Probes through the whole agent, against a real in-process API server: a readiness probe
//! (`httpGet` on a server in this test) flips the container's and the pod's readiness both
//! ways; a failing liveness probe (`exec`) gets the container restarted; a startup probe holds
//! `started` and readiness back until it passes.
//!
//! Real time and real processes: tests poll with generous deadlines and never assert on how
//! long something took; every test kills whatever its pods left running, even when it fails.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::PostParams;
use kube::Api;
use serde_json::json;
use setpoint_agent::AgentConfig;
use setpoint_runtime::Client;
use setpoint_testenv::TestEnv;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::time::{sleep, Instant};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const NODE: &str = "probe-node";

/// An API server and an agent on it; kills what the pods left when dropped.
struct Harness {
    _env: TestEnv,
    client: Client,
    root: tempfile::TempDir,
    shutdown: CancellationToken,
}

impl Harness {
    async fn start() -> Harness {
        let env = TestEnv::start().await.expect("test API server");
        let client = env.client();
        let root = tempfile::tempdir().expect("a root directory");
        let shutdown = CancellationToken::new();
        let config = AgentConfig {
            node_name: NODE.to_owned(),
            root_dir: root.path().to_owned(),
            node_ip: "127.0.0.1".parse().expect("an IP"),
            listen: "127.0.0.1:0".parse().expect("an address"),
            client_ca_pem: test_ca_pem(),
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
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [container]},
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

fn test_ca_pem() -> String {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).expect("a CA").pem()
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

fn pod_ready(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn running(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_some_and(|s| s.running.is_some())
}

/// An HTTP server on 127.0.0.1 answering 200 while `healthy`, else 503.
async fn health_server(healthy: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let healthy = healthy.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf).await;
                let status = if healthy.load(Ordering::SeqCst) {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = conn
                    .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes())
                    .await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_probe_should_flip_the_pod_ready_both_ways() {
    let h = Harness::start().await;
    let healthy = Arc::new(AtomicBool::new(false));
    let port = health_server(healthy.clone()).await;
    h.create_pod(
        "web",
        json!({
            "command": ["sh", "-c", "exec sleep 1000"],
            "ports": [{"name": "http", "containerPort": port}],
            "readinessProbe": {
                "httpGet": {"port": "http", "path": "/healthz"},
                "periodSeconds": 1, "failureThreshold": 1,
            },
        }),
    )
    .await;
    // Running but not ready: the probe fails.
    let pod = h.wait_container("web", "running", |_, c| running(c)).await;
    sleep(Duration::from_secs(2)).await;
    let pod = h.pods().get("web").await.unwrap_or(pod);
    assert_eq!(pod_ready(&pod).as_deref(), Some("False"));
    healthy.store(true, Ordering::SeqCst);
    h.wait_container("web", "ready", |p, c| {
        c.ready && pod_ready(p).as_deref() == Some("True")
    })
    .await;
    healthy.store(false, Ordering::SeqCst);
    let pod = h
        .wait_container("web", "not ready again", |p, c| {
            !c.ready && pod_ready(p).as_deref() == Some("False")
        })
        .await;
    let status = pod
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .expect("a container status");
    assert_eq!(status.restart_count, 0, "readiness never restarts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_liveness_probe_should_restart_the_container() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("tempdir");
    let sick = work.path().join("sick");
    h.create_pod(
        "live",
        json!({
            "command": ["sh", "-c", "exec sleep 1000"],
            "livenessProbe": {
                "exec": {"command": ["sh", "-c", format!("test ! -f {}", sick.display())]},
                "periodSeconds": 1, "failureThreshold": 2,
            },
        }),
    )
    .await;
    let first = h.wait_container("live", "running", |_, c| running(c)).await;
    let first_id = first
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.container_id);
    std::fs::write(&sick, "").expect("make it sick");
    h.wait_container("live", "restarted", |_, c| {
        c.restart_count >= 1 && running(c) && c.container_id != first_id
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_probe_should_hold_started_and_ready_until_it_passes() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("tempdir");
    let up = work.path().join("up");
    h.create_pod(
        "slow",
        json!({
            "command": ["sh", "-c", "exec sleep 1000"],
            "startupProbe": {
                "exec": {"command": ["test", "-f", up.display().to_string()]},
                "periodSeconds": 1, "failureThreshold": 1000,
            },
        }),
    )
    .await;
    let pod = h.wait_container("slow", "running", |_, c| running(c)).await;
    sleep(Duration::from_secs(2)).await;
    let pod = h.pods().get("slow").await.unwrap_or(pod);
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .expect("a container status");
    assert_eq!(
        status.started,
        Some(false),
        "not started before the probe passes"
    );
    assert!(!status.ready);
    std::fs::write(&up, "").expect("start it");
    h.wait_container("slow", "started and ready", |p, c| {
        c.started == Some(true) && c.ready && pod_ready(p).as_deref() == Some("True")
    })
    .await;
}
