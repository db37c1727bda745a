//! The node agent running pods as real processes, against a real in-process API server: pods
//! bound to the agent's node (nothing else runs: no scheduler, no controllers) become
//! processes; their exits, restarts, deletion, and an agent restart are checked in the API and
//! in `/proc`.
//!
//! Real time and real processes: tests poll with generous deadlines and never assert on how
//! long something took. Every test kills whatever its pods left running, even when it fails.

use crate::common;

mod agent_restart;
mod deletion;
mod lifecycle;
mod limits;
mod pid_namespace;
mod pod_network;
mod pod_spec;
mod sa_tokens;
mod simulated_completion;
mod streams;
mod volumes;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{kill_everything_under, test_ca_pem};
use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Pod, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use serde_json::json;
use setpoint_agent::{AgentConfig, ContainerTracking};
use setpoint_runtime::Client;
use setpoint_testenv::TestEnv;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const NODE: &str = "node-1";

/// An API server, an agent on it, and the agent's root directory.
struct Harness {
    _env: TestEnv,
    client: Client,
    root: tempfile::TempDir,
    agent: Option<(CancellationToken, JoinHandle<()>)>,
    tracking: ContainerTracking,
    mount_mode: setpoint_agent::MountMode,
    pod_network: setpoint_agent::PodNetworkMode,
}

impl Harness {
    async fn start() -> Harness {
        Harness::start_tracking(ContainerTracking::Auto).await
    }

    async fn start_tracking(tracking: ContainerTracking) -> Harness {
        Harness::start_with(tracking, setpoint_agent::MountMode::Auto).await
    }

    async fn start_with(
        tracking: ContainerTracking,
        mount_mode: setpoint_agent::MountMode,
    ) -> Harness {
        let env = TestEnv::start().await.expect("test API server");
        let client = env.client();
        let mut harness = Harness {
            _env: env,
            client,
            root: tempfile::tempdir().expect("a root directory"),
            agent: None,
            tracking,
            mount_mode,
            pod_network: setpoint_agent::PodNetworkMode::Host,
        };
        harness.start_agent();
        harness
    }

    fn start_agent(&mut self) {
        let config = AgentConfig {
            node_name: NODE.to_owned(),
            root_dir: self.root.path().to_owned(),
            node_ip: "127.0.0.1".parse().expect("an IP"),
            listen: "127.0.0.1:0".parse().expect("an address"),
            client_ca_pem: test_ca_pem(),
            shim: vec![env!("CARGO_BIN_EXE_setpoint-agent-shim").into()],
            capacity_override: BTreeMap::new(),
            metrics_interval: setpoint_agent::DEFAULT_METRICS_INTERVAL,
            container_tracking: self.tracking,
            mount_mode: self.mount_mode,
            services: setpoint_agent::ServicesConfig::default(),
            pod_network: self.pod_network,
        };
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(setpoint_agent::run(
            self.client.clone(),
            config,
            shutdown.clone(),
        ));
        let task = tokio::spawn(async move {
            task.await
                .expect("the agent task")
                .expect("the agent runs until shut down");
        });
        self.agent = Some((shutdown, task));
    }

    /// Stops the agent (its containers keep running).
    async fn stop_agent(&mut self) {
        if let Some((shutdown, task)) = self.agent.take() {
            shutdown.cancel();
            task.await.expect("the agent stopped cleanly");
        }
    }

    fn pods(&self) -> Api<Pod> {
        self.client.namespaced_api::<Pod>(NS)
    }

    /// Creates a pod bound to the agent's node from a spec.
    async fn create_pod(&self, name: &str, spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["nodeName"] = json!(NODE);
        for list in ["initContainers", "containers"] {
            for container in spec[list].as_array_mut().into_iter().flatten() {
                if container.get("image").is_none() {
                    container["image"] = json!("busybox");
                }
            }
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": spec,
        }))
        .expect("a pod");
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod created")
    }

    /// Waits until `check` accepts the pod; panics with the pod's status after 60 s.
    async fn wait_pod(&self, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pod = self.pods().get_opt(name).await.expect("get pod");
            if let Some(pod) = &pod {
                if check(pod) {
                    return pod.clone();
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "pod {name}: timed out waiting for {what}; status: {}",
                    serde_json::to_string_pretty(&pod.map(|p| p.status)).unwrap_or_default()
                );
            }
            sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_gone(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.pods().get_opt(name).await.expect("get pod").is_some() {
            assert!(
                Instant::now() < deadline,
                "pod {name} still exists after 60 s"
            );
            sleep(Duration::from_millis(50)).await;
        }
    }

    async fn delete_pod(&self, name: &str) {
        self.pods()
            .delete(name, &DeleteParams::default())
            .await
            .expect("pod deleted");
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some((shutdown, _)) = &self.agent {
            shutdown.cancel();
        }
        // Stops what runs and removes the root's cgroups; then kills by the records, in case.
        setpoint_agent::cleanup(self.root.path(), Duration::ZERO);
        kill_everything_under(self.root.path());
    }
}

fn files_named(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found
}

/// A process id parsed from a status's `containerID` (`setpoint://<pid>`).
fn container_pid(status: &ContainerStatus) -> Option<i32> {
    status
        .container_id
        .as_deref()?
        .strip_prefix("setpoint://")?
        .parse()
        .ok()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// The processes whose environment holds `SETPOINT_TEST_MARKER=marker`.
fn marked(marker: &str) -> Vec<i32> {
    let needle = format!("SETPOINT_TEST_MARKER={marker}");
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/environ"))
                        .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn marker(test: &str) -> String {
    format!("{test}-{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
}

fn first_container(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status.as_ref()?.container_statuses.as_ref()?.first()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn running(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_some_and(|s| s.running.is_some())
}

fn sleeper(marker: &str) -> serde_json::Value {
    json!({
        "containers": [{
            "name": "app", "image": "busybox",
            "command": ["sh", "-c", "echo hi; exec sleep 1000"],
            "env": [{"name": "SETPOINT_TEST_MARKER", "value": marker}]
        }]
    })
}
