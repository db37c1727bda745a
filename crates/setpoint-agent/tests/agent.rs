//! The node agent running pods as real processes, against a real in-process API server: pods
//! bound to the agent's node (nothing else runs: no scheduler, no controllers) become
//! processes; their exits, restarts, deletion, and an agent restart are checked in the API and
//! in `/proc`.
//!
//! Real time and real processes: tests poll with generous deadlines and never assert on how
//! long something took. Every test kills whatever its pods left running, even when it fails.

mod common;

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
}

impl Harness {
    async fn start() -> Harness {
        Harness::start_tracking(ContainerTracking::Auto).await
    }

    async fn start_tracking(tracking: ContainerTracking) -> Harness {
        let env = TestEnv::start().await.expect("test API server");
        let client = env.client();
        let mut harness = Harness {
            _env: env,
            client,
            root: tempfile::tempdir().expect("a root directory"),
            agent: None,
            tracking,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_should_run_as_a_real_process_and_report_running() {
    let h = Harness::start().await;
    let marker = marker("run");
    h.create_pod("web", sleeper(&marker)).await;
    let pod = h
        .wait_pod("web", "Running and ready", |p| {
            phase(p) == "Running" && first_container(p).is_some_and(|c| running(c) && c.ready)
        })
        .await;
    let status = pod.status.as_ref().expect("status");
    assert_eq!(status.pod_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(status.host_ip.as_deref(), Some("127.0.0.1"));
    assert!(status.start_time.is_some());
    let conditions: BTreeMap<&str, &str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    for condition in [
        "PodScheduled",
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ] {
        assert_eq!(
            conditions.get(condition),
            Some(&"True"),
            "{condition}: {conditions:?}"
        );
    }
    let container = first_container(&pod).expect("container status");
    assert_eq!(container.restart_count, 0);
    assert_eq!(container.started, Some(true));
    let pid = container_pid(container).expect("a pid in containerID");
    assert!(alive(pid), "process {pid} is not running");
    assert_eq!(
        marked(&marker),
        vec![pid],
        "exactly the container's process carries the marker"
    );
    // Its output is in the log.
    let logs = files_named(h.root.path(), "0.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !logs
        .iter()
        .any(|l| std::fs::read_to_string(l).is_ok_and(|t| t.contains("hi")))
    {
        assert!(Instant::now() < deadline, "no \"hi\" in {logs:?}");
        sleep(Duration::from_millis(50)).await;
    }

    h.delete_pod("web").await;
    h.wait_gone("web").await;
    assert!(!alive(pid), "the deleted pod's process {pid} still runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_with_restart_policy_never_should_fail_the_pod_with_the_exit_code() {
    let h = Harness::start().await;
    h.create_pod(
        "fails",
        json!({"restartPolicy": "Never", "containers": [{"name": "app", "command": ["sh", "-c", "exit 1"]}]}),
    )
    .await;
    let pod = h
        .wait_pod("fails", "Failed", |p| phase(p) == "Failed")
        .await;
    let container = first_container(&pod).expect("container status");
    let terminated = container
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 1);
    assert_eq!(terminated.reason.as_deref(), Some("Error"));
    assert_eq!(container.restart_count, 0);

    h.create_pod(
        "succeeds",
        json!({"restartPolicy": "OnFailure", "containers": [{"name": "app", "command": ["true"]}]}),
    )
    .await;
    let pod = h
        .wait_pod("succeeds", "Succeeded", |p| phase(p) == "Succeeded")
        .await;
    let terminated = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (0, Some("Completed"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_container_should_restart_then_back_off() {
    let h = Harness::start().await;
    h.create_pod(
        "crashy",
        json!({"restartPolicy": "OnFailure", "containers": [{"name": "app", "command": ["sh", "-c", "exit 3"]}]}),
    )
    .await;
    // The first restart is immediate; the second waits 10 s: the container shows
    // CrashLoopBackOff with its last exit.
    let pod = h
        .wait_pod("crashy", "CrashLoopBackOff", |p| {
            first_container(p).is_some_and(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
            })
        })
        .await;
    assert_eq!(
        phase(&pod),
        "Running",
        "a pod restarting its containers is Running"
    );
    let container = first_container(&pod).expect("container status");
    assert!(
        container.restart_count >= 1,
        "restartCount {}",
        container.restart_count
    );
    let waiting = container
        .state
        .as_ref()
        .and_then(|s| s.waiting.as_ref())
        .expect("waiting");
    let message = waiting.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("back-off 10s restarting failed container=app pod=crashy_default("),
        "{message}"
    );
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState.terminated");
    assert_eq!(last.exit_code, 3);
    h.delete_pod("crashy").await;
    h.wait_gone("crashy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_process_should_be_restarted_at_once_with_its_last_state() {
    let h = Harness::start().await;
    let marker = marker("kill");
    h.create_pod("victim", sleeper(&marker)).await;
    let pod = h
        .wait_pod("victim", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let pod = h
        .wait_pod("victim", "running again after one restart", |p| {
            first_container(p).is_some_and(|c| running(c) && c.restart_count == 1)
        })
        .await;
    let container = first_container(&pod).expect("status");
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState.terminated");
    assert_eq!((last.exit_code, last.signal), (137, Some(9)));
    let new_pid = container_pid(container).expect("pid");
    assert_ne!(new_pid, pid);
    assert!(alive(new_pid));
    assert_eq!(marked(&marker), vec![new_pid], "one process, the new one");
    h.delete_pod("victim").await;
    h.wait_gone("victim").await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_should_resolve_references_and_expand_variables() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    let config_maps = h.client.namespaced_api::<ConfigMap>(NS);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "settings"}, "data": {"mode": "fast", "level": "3"}}),
            )
            .expect("a configmap"),
        )
        .await
        .expect("configmap created");
    h.client
        .namespaced_api::<Secret>(NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}),
            )
            .expect("a secret"),
        )
        .await
        .expect("secret created");
    h.create_pod(
        "envy",
        json!({"containers": [{
            "name": "app",
            "command": ["sh", "-c", "env > env.txt; echo $(GREETING) > args.txt; sleep 1000"],
            "workingDir": work.path(),
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "MISSING", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": true}}},
                {"name": "GREETING", "value": "hello-$(POD_NAME)"},
                {"name": "ESCAPED", "value": "$$(POD_NAME)"}
            ]
        }]}),
    )
    .await;
    h.wait_pod("envy", "Running", |p| {
        first_container(p).is_some_and(running)
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let (env, args) = loop {
        let env = std::fs::read_to_string(work.path().join("env.txt")).unwrap_or_default();
        let args = std::fs::read_to_string(work.path().join("args.txt")).unwrap_or_default();
        if !args.is_empty() {
            break (env, args);
        }
        assert!(Instant::now() < deadline, "the container wrote nothing");
        sleep(Duration::from_millis(50)).await;
    };
    let env: BTreeMap<&str, &str> = env.lines().filter_map(|l| l.split_once('=')).collect();
    assert_eq!(env.get("POD_NAME"), Some(&"envy"));
    assert_eq!(env.get("POD_NS"), Some(&"default"));
    assert_eq!(env.get("NODE"), Some(&NODE));
    assert_eq!(env.get("MODE"), Some(&"fast"));
    assert_eq!(env.get("CFG_level"), Some(&"3"));
    assert_eq!(env.get("TOKEN"), Some(&"s3cret"));
    assert_eq!(env.get("MISSING"), None);
    assert_eq!(env.get("GREETING"), Some(&"hello-envy"));
    assert_eq!(env.get("ESCAPED"), Some(&"$(POD_NAME)"));
    assert_eq!(env.get("HOSTNAME"), Some(&"envy"));
    assert_eq!(
        env.get("MIMALLOC_ALLOW_THP"),
        None,
        "the shim's allocator setting stays with the shim"
    );
    assert_eq!(args.trim(), "hello-envy", "$(VAR) in command is expanded");

    // A missing (non-optional) ConfigMap keeps the container waiting, with the reason.
    h.create_pod(
        "unconfigured",
        json!({"containers": [{"name": "app", "command": ["true"],
               "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}]}]}),
    )
    .await;
    let pod = h
        .wait_pod("unconfigured", "CreateContainerConfigError", |p| {
            first_container(p).is_some_and(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .is_some_and(|w| w.reason.as_deref() == Some("CreateContainerConfigError"))
            })
        })
        .await;
    let waiting = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.waiting.clone())
        .expect("waiting");
    assert_eq!(
        waiting.message.as_deref(),
        Some("configmap \"absent\" not found")
    );
    assert_eq!(phase(&pod), "Pending");
    for name in ["envy", "unconfigured"] {
        h.delete_pod(name).await;
    }
    for name in ["envy", "unconfigured"] {
        h.wait_gone(name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_should_run_in_order_each_to_success_before_the_containers() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    h.create_pod(
        "initialized",
        json!({
            "initContainers": [
                {"name": "first", "command": ["sh", "-c", "sleep 0.3; echo first >> order"], "workingDir": work.path()},
                {"name": "second", "command": ["sh", "-c", "echo second >> order"], "workingDir": work.path()}
            ],
            "containers": [
                {"name": "main", "command": ["sh", "-c", "echo main >> order; sleep 1000"], "workingDir": work.path()}
            ]
        }),
    )
    .await;
    let pod = h
        .wait_pod("initialized", "Running", |p| {
            phase(p) == "Running" && first_container(p).is_some_and(running)
        })
        .await;
    let order = std::fs::read_to_string(work.path().join("order")).expect("the order file");
    assert_eq!(order, "first\nsecond\nmain\n");
    let inits = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .expect("init container statuses");
    for init in &inits {
        let terminated = init
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(
            terminated.reason.as_deref(),
            Some("Completed"),
            "{}",
            init.name
        );
    }
    h.delete_pod("initialized").await;
    h.wait_gone("initialized").await;

    // A failing init container with restartPolicy Never fails the pod; the containers never run.
    h.create_pod(
        "bad-init",
        json!({
            "restartPolicy": "Never",
            "initContainers": [{"name": "init", "command": ["false"]}],
            "containers": [{"name": "main", "command": ["sh", "-c", "echo ran > ran"], "workingDir": work.path()}]
        }),
    )
    .await;
    let pod = h
        .wait_pod("bad-init", "Failed", |p| phase(p) == "Failed")
        .await;
    assert!(!work.path().join("ran").exists());
    let main = first_container(&pod).expect("status");
    assert!(
        main.state.as_ref().is_some_and(|s| s.waiting.is_some()),
        "{main:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_without_command_should_wait_with_a_clear_reason() {
    let h = Harness::start().await;
    h.create_pod(
        "imagey",
        json!({"containers": [{"name": "nginx", "image": "nginx"}]}),
    )
    .await;
    let pod = h
        .wait_pod("imagey", "waiting with a reason", |p| {
            first_container(p)
                .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.waiting.is_some()))
        })
        .await;
    let waiting = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.waiting.clone())
        .expect("waiting");
    assert_eq!(
        waiting.reason.as_deref(),
        Some("CreateContainerConfigError")
    );
    assert_eq!(
        waiting.message.as_deref(),
        Some("setpoint runs processes, not images: container nginx has no command and no args")
    );
    assert_eq!(phase(&pod), "Pending");
    assert_eq!(first_container(&pod).map(|c| c.restart_count), Some(0));
    h.delete_pod("imagey").await;
    h.wait_gone("imagey").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_with_args_and_no_command_should_run_its_args() {
    // Regression (issue 14.18): `kubectl run x --image=busybox -- sh -c '…'` puts the command
    // in `args`; the pod waited with CreateContainerConfigError because `command` was empty.
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    h.create_pod(
        "argsonly",
        json!({"restartPolicy": "Never", "containers": [{
            "name": "app", "workingDir": work.path(),
            "args": ["sh", "-c", "echo ran-from-args > out"]
        }]}),
    )
    .await;
    let pod = h
        .wait_pod("argsonly", "Succeeded", |p| phase(p) == "Succeeded")
        .await;
    let terminated = first_container(&pod)
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 0);
    assert_eq!(
        std::fs::read_to_string(work.path().join("out")).expect("the output file"),
        "ran-from-args\n"
    );
    h.delete_pod("argsonly").await;
    h.wait_gone("argsonly").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_should_run_pre_stop_then_sigterm_and_sigkill_after_the_grace_period() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    // Honors SIGTERM: writes and exits.
    h.create_pod(
        "polite",
        json!({"containers": [{
            "name": "app", "workingDir": work.path(),
            "command": ["sh", "-c", "trap 'echo term >> polite; exit 0' TERM; while true; do sleep 0.1; done"],
            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo prestop >> polite"]}}}
        }]}),
    )
    .await;
    // Ignores SIGTERM: killed after its 2 s grace period.
    h.create_pod(
        "stubborn",
        json!({"terminationGracePeriodSeconds": 2, "containers": [{
            "name": "app", "workingDir": work.path(),
            "command": ["sh", "-c", "trap '' TERM; echo started > stubborn; while true; do sleep 0.1; done"]
        }]}),
    )
    .await;
    let mut pids = Vec::new();
    for name in ["polite", "stubborn"] {
        let pod = h
            .wait_pod(name, "Running", |p| first_container(p).is_some_and(running))
            .await;
        pids.push(container_pid(first_container(&pod).expect("status")).expect("pid"));
    }
    // The traps are set once the shells have written (stubborn) or run a loop (polite).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !work.path().join("stubborn").exists() {
        assert!(Instant::now() < deadline);
        sleep(Duration::from_millis(50)).await;
    }
    sleep(Duration::from_millis(300)).await;
    for name in ["polite", "stubborn"] {
        h.delete_pod(name).await;
    }
    for name in ["polite", "stubborn"] {
        h.wait_gone(name).await;
    }
    for pid in pids {
        assert!(!alive(pid), "process {pid} survived its pod's deletion");
    }
    let polite =
        std::fs::read_to_string(work.path().join("polite")).expect("the hook and the trap wrote");
    assert_eq!(polite, "prestop\nterm\n", "preStop first, then SIGTERM");
}

/// The processes whose command line holds `arg`.
fn with_arg(arg: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    alive(*pid)
                        && std::fs::read(format!("/proc/{pid}/cmdline"))
                            .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The session id of process `pid`.
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// Kills the processes `with_arg(arg)` finds (what a failed test left).
struct KillWithArg(String);

impl Drop for KillWithArg {
    fn drop(&mut self) {
        for pid in with_arg(&self.0) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// Runs a pod whose container starts `sleep` in a session of its own (`setsid`) and keeps
/// running; deletes the pod; checks that the escaped `sleep` is gone too. Returns the run
/// record of the container.
async fn escaped_process_should_die_with_its_pod(h: &Harness, name: &str) -> serde_json::Value {
    // A unique duration: the escaped sleep is found by its argument.
    let arg = format!("1001.{}{}", std::process::id(), rand_suffix() % 1_000_000);
    let _cleanup = KillWithArg(arg.clone());
    h.create_pod(
        name,
        json!({"containers": [{
            "name": "app",
            "command": ["sh", "-c", format!("setsid sleep {arg} & exec sleep 1000")],
        }]}),
    )
    .await;
    let pod = h
        .wait_pod(name, "Running", |p| first_container(p).is_some_and(running))
        .await;
    let container = container_pid(first_container(&pod).expect("status")).expect("pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    let escaped = loop {
        if let [pid] = with_arg(&arg)[..] {
            break pid;
        }
        assert!(Instant::now() < deadline, "the escaped sleep never ran");
        sleep(Duration::from_millis(20)).await;
    };
    assert_ne!(
        session_of(escaped),
        session_of(container),
        "setsid put the sleep in a session of its own"
    );
    let record = files_named(h.root.path(), ".run.json")
        .first()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .expect("a run record");
    h.delete_pod(name).await;
    h.wait_gone(name).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !with_arg(&arg).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the escaped process {escaped} (sleep {arg}) outlived its pod"
        );
        sleep(Duration::from_millis(20)).await;
    }
    record
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_that_left_the_session_should_be_killed_with_its_pod_through_its_cgroup() {
    // Regression (issue 14.13): `setsid sleep 1001 &` in a container outlived its deleted pod;
    // the agent killed the container's process group only. (Tests run as root here, so the
    // container has a cgroup.)
    let h = Harness::start().await;
    let record = escaped_process_should_die_with_its_pod(&h, "escaper").await;
    let cgroup = record["cgroup"]["dir"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("the run used a cgroup: {record}"));
    assert!(
        !cgroup.exists(),
        "the run's cgroup {} was removed",
        cgroup.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_that_left_the_session_should_be_killed_with_its_pod_without_cgroups() {
    // Regression (issue 14.13), the fallback: without cgroups the shim is a child subreaper
    // and kills every descendant.
    let h = Harness::start_tracking(ContainerTracking::Subreaper).await;
    let record = escaped_process_should_die_with_its_pod(&h, "escaper").await;
    assert!(record.get("cgroup").is_none(), "no cgroup: {record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_agent_should_adopt_running_containers_without_duplicates() {
    let mut h = Harness::start().await;
    let marker = marker("adopt");
    h.create_pod("steady", sleeper(&marker)).await;
    let pod = h
        .wait_pod("steady", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");

    h.stop_agent().await;
    assert!(alive(pid), "stopping the agent must not stop containers");
    h.start_agent();
    // Give the new agent time to sync; it must not start a second copy.
    sleep(Duration::from_secs(2)).await;
    let pod = h
        .wait_pod("steady", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let container = first_container(&pod).expect("status");
    assert_eq!(container_pid(container), Some(pid), "the same process");
    assert_eq!(container.restart_count, 0);
    assert_eq!(marked(&marker), vec![pid], "no duplicate process");

    // The adopted container is watched: killing it restarts it.
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let pod = h
        .wait_pod("steady", "restarted", |p| {
            first_container(p).is_some_and(|c| running(c) && c.restart_count == 1)
        })
        .await;
    let new_pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    assert_eq!(marked(&marker), vec![new_pid]);
    h.delete_pod("steady").await;
    h.wait_gone("steady").await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_lost_while_the_agent_was_away_should_be_reported_and_restarted() {
    let mut h = Harness::start().await;
    let marker = marker("lost");
    h.create_pod("lost", sleeper(&marker)).await;
    let pod = h
        .wait_pod("lost", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    h.stop_agent().await;
    // The shim and the container both vanish without an exit record (as in a node reboot).
    kill_everything_under(h.root.path());
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(Instant::now() < deadline);
        sleep(Duration::from_millis(20)).await;
    }
    h.start_agent();
    let pod = h
        .wait_pod("lost", "restarted after the loss", |p| {
            first_container(p).is_some_and(|c| running(c) && c.restart_count == 1)
        })
        .await;
    let last = first_container(&pod)
        .and_then(|c| c.last_state.as_ref()?.terminated.clone())
        .expect("lastState.terminated");
    assert_eq!(last.reason.as_deref(), Some("Unknown"));
    assert_eq!(last.exit_code, 137);
    h.delete_pod("lost").await;
    h.wait_gone("lost").await;
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_deleted_while_the_agent_was_away_should_have_its_processes_killed() {
    let mut h = Harness::start().await;
    let marker = marker("orphan");
    h.create_pod("orphan", sleeper(&marker)).await;
    let pod = h
        .wait_pod("orphan", "Running", |p| {
            first_container(p).is_some_and(running)
        })
        .await;
    let pid = container_pid(first_container(&pod).expect("status")).expect("pid");
    h.stop_agent().await;
    // Force deletion: gone from the API at once, processes still running.
    h.pods()
        .delete(
            "orphan",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await
        .expect("force delete");
    h.wait_gone("orphan").await;
    assert!(alive(pid));
    h.start_agent();
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "the orphan's process {pid} still runs"
        );
        sleep(Duration::from_millis(50)).await;
    }
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_should_gate_readiness_and_restart_a_container_failing_liveness() {
    let h = Harness::start().await;
    let work = tempfile::tempdir().expect("a working directory");
    h.create_pod(
        "probed",
        json!({"containers": [{
            "name": "app", "workingDir": work.path(),
            "command": ["sh", "-c", "sleep 1; touch ready; exec sleep 1000"],
            "readinessProbe": {"exec": {"command": ["test", "-f", "ready"]}, "periodSeconds": 1},
            "livenessProbe": {"exec": {"command": ["sh", "-c", "test ! -f dead"]}, "periodSeconds": 1, "failureThreshold": 1}
        }]}),
    )
    .await;
    let pod = h
        .wait_pod("probed", "ready", |p| {
            first_container(p).is_some_and(|c| c.ready)
        })
        .await;
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    assert_eq!(ready.as_deref(), Some("True"));

    std::fs::write(work.path().join("dead"), "").expect("mark dead");
    let pod = h
        .wait_pod("probed", "restarted for its liveness probe", |p| {
            first_container(p).is_some_and(|c| c.restart_count >= 1)
        })
        .await;
    std::fs::remove_file(work.path().join("dead")).expect("alive again");
    let last = first_container(&pod)
        .and_then(|c| c.last_state.as_ref()?.terminated.clone())
        .expect("lastState.terminated");
    let message = last.message.unwrap_or_default();
    assert!(message.starts_with("Liveness probe failed"), "{message}");
    h.delete_pod("probed").await;
    h.wait_gone("probed").await;
}
