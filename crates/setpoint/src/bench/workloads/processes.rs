//! Pods as real processes: `setpoint server --no-agent` and `setpoint agent` as two children
//! (so the agent's own CPU and memory can be read), a Deployment of 200 `sleep` pods from
//! create to every pod Running and Ready, the agent's CPU and memory while they run, then one
//! container killed with SIGKILL and the time until it runs again — seen in `/proc` and seen
//! through the API.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use setpoint_runtime::k8s_openapi::api::apps::v1::Deployment;
use setpoint_runtime::k8s_openapi::api::core::v1::{Namespace, Pod};
use setpoint_runtime::kube::api::{DeleteParams, PostParams};
use setpoint_runtime::Client;
use tokio::process::{Child, Command};

use super::pods::{ready_count, PodTracker};
use super::simulated::secs;
use crate::bench::latency::Latencies;
use crate::bench::report::{self, Row};
use crate::bench::server::ServerProcess;
use crate::bench::usage;

/// The namespace the pods run in.
const NAMESPACE: &str = "bench";
/// The node the agent registers.
const NODE: &str = "bench-node";
/// The workload's name and `app` label.
const APP: &str = "sleepers";
/// The environment variable that marks the benchmark's container processes in `/proc`.
const MARKER: &str = "SETPOINT_BENCH_MARKER";

/// Runs the benchmark under `root` with `replicas` pods; returns its rows.
pub(super) async fn bench(root: &Path, replicas: u32) -> Result<Vec<Row>> {
    let (mut server, _) = ServerProcess::start(root, &["--no-agent"]).await?;
    let marker = format!("{}-{}", std::process::id(), rand::random::<u32>());
    let outcome = async {
        let mut agent = AgentProcess::start(root, server.kubeconfig(), replicas + 50).await?;
        let outcome = run(&server, &agent, replicas, &marker).await;
        let outcome = agent.check_running().and(outcome);
        agent.stop().await;
        outcome
    }
    .await;
    // Whatever happened, no container process of ours outlives the benchmark.
    let leftovers = marked_processes(&marker);
    for pid in &leftovers {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    let outcome = server.check_running().and(outcome);
    let log = server.log_tail();
    server.stop().await?;
    let mut rows = outcome.with_context(|| log)?;
    rows.push(Row::new(
        "processes left after deleting the deployment and stopping the agent",
        leftovers.len().to_string(),
    ));
    Ok(rows)
}

async fn run(
    server: &ServerProcess,
    agent: &AgentProcess,
    replicas: u32,
    marker: &str,
) -> Result<Vec<Row>> {
    let client = Client::from_kubeconfig(server.kubeconfig())
        .await
        .context("reading the server's kubeconfig")?;
    client
        .api::<Namespace>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await
        .context("creating the namespace")?;
    wait_node_ready(&client).await?;
    let tracker = PodTracker::start(&client, NAMESPACE);
    let deployments = client.namespaced_api::<Deployment>(NAMESPACE);
    let mut rows = Vec::new();

    let started = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment(replicas, marker))
        .await
        .context("creating the deployment")?;
    let want = replicas as usize;
    tracker
        .wait(APP, Duration::from_secs(300), "all running", |pods| {
            ready_count(pods) >= want
        })
        .await?;
    let elapsed = started.elapsed();
    let mut latencies = Latencies::new();
    for pod in tracker.of(APP) {
        if let Some(ready) = pod.ready {
            latencies.record(ready - pod.created);
        }
    }
    let summary = latencies.summary();
    rows.push(
        Row::new(
            format!("apply {replicas} process pods → all Running+Ready"),
            format!(
                "{} s ({} pods/s)",
                secs(elapsed),
                report::rate(replicas.into(), elapsed)
            ),
        )
        .target("≤ 10 s", elapsed <= Duration::from_secs(10)),
    );
    rows.push(
        Row::new(
            "process pods: per-pod start (created → seen Running+Ready)",
            format!("{} pods", report::count(summary.count)),
        )
        .latency(summary)
        .target("p99 ≤ 1 s", summary.p99 <= Duration::from_secs(1)),
    );
    let running = marked_processes(marker).len();
    if running != want {
        bail!("{running} marked processes running for {want} ready pods");
    }

    // The agent at rest with the pods running.
    let before = usage::cpu_time(Some(agent.pid))?;
    let window = Duration::from_secs(10);
    tokio::time::sleep(window).await;
    let agent_cpu = usage::cpu_time(Some(agent.pid))?.saturating_sub(before);
    rows.push(Row::new(
        format!("agent with {replicas} pods running: CPU"),
        format!(
            "{:.2}% of one core ({} ms over {} s)",
            agent_cpu.as_secs_f64() / window.as_secs_f64() * 100.0,
            agent_cpu.as_millis(),
            window.as_secs()
        ),
    ));
    let shims = shim_pids(&agent.root);
    let shims_pss: u64 = shims.iter().filter_map(|&pid| pss_bytes(pid)).sum();
    rows.push(Row::new(
        format!("agent with {replicas} pods running: memory"),
        format!(
            "agent RSS {}; {} shims, PSS {} in all",
            report::mib(usage::rss_bytes(agent.pid)?),
            shims.len(),
            report::mib(shims_pss)
        ),
    ));

    rows.push(restart_after_kill(&client, marker).await?);

    deployments
        .delete(APP, &DeleteParams::background())
        .await
        .context("deleting the deployment")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !marked_processes(marker).is_empty() {
        if Instant::now() >= deadline {
            bail!(
                "{} processes still running 120 s after deleting the deployment",
                marked_processes(marker).len()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(rows)
}

/// Kills one container process with SIGKILL; measures until a new process runs in its place
/// (`/proc`) and until the API shows the container running again with one restart.
async fn restart_after_kill(client: &Client, marker: &str) -> Result<Row> {
    let before: BTreeSet<u32> = marked_processes(marker).into_iter().collect();
    let &victim = before
        .iter()
        .next()
        .context("no container process to kill")?;
    let pod_name = environ(victim)
        .and_then(|env| {
            env.into_iter()
                .find_map(|(k, v)| (k == "POD_NAME").then_some(v))
        })
        .context("the killed process has no POD_NAME")?;
    let killed = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -9 {victim} failed");
    }
    let deadline = killed + Duration::from_secs(60);
    let mut in_proc = None;
    let mut in_api = None;
    let pods = client.namespaced_api::<Pod>(NAMESPACE);
    while in_proc.is_none() || in_api.is_none() {
        if in_proc.is_none() {
            let now: BTreeSet<u32> = marked_processes(marker).into_iter().collect();
            if now.len() == before.len() && !now.contains(&victim) {
                in_proc = Some(killed.elapsed());
            }
        }
        if in_api.is_none() {
            let pod = pods.get(&pod_name).await?;
            let restarted = pod
                .status
                .and_then(|s| s.container_statuses)
                .and_then(|cs| cs.into_iter().next())
                .is_some_and(|c| {
                    c.restart_count >= 1 && c.state.is_some_and(|s| s.running.is_some())
                });
            if restarted {
                in_api = Some(killed.elapsed());
            }
        }
        if Instant::now() >= deadline {
            bail!("the killed container of {pod_name} did not run again within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let in_proc = in_proc.unwrap_or_default();
    let in_api = in_api.unwrap_or_default();
    Ok(Row::new(
        "kill -9 a container → running again (first restart)",
        format!(
            "new process after {}; API shows it running, restartCount 1, after {}",
            report::millis(in_proc),
            report::millis(in_api)
        ),
    )
    .target("< 1 s", in_proc < Duration::from_secs(1)))
}

/// The benchmark's Deployment: `replicas` pods sleeping, marked with `MARKER=marker`.
fn deployment(replicas: u32, marker: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": APP},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "sleep",
                        "image": "busybox",
                        "command": ["sleep", "86400"],
                        "env": [
                            {"name": MARKER, "value": marker},
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                        ]
                    }]
                }
            }
        }
    }))
    .expect("a well-formed Deployment")
}

/// Waits until the agent's node is Ready.
async fn wait_node_ready(client: &Client) -> Result<()> {
    use setpoint_runtime::k8s_openapi::api::core::v1::Node;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(node) = client.api::<Node>().get(NODE).await {
            let ready = node
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            bail!("node {NODE} not Ready within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `setpoint agent` child process; killed when dropped.
struct AgentProcess {
    child: Child,
    pid: u32,
    root: PathBuf,
}

impl AgentProcess {
    /// Starts `setpoint agent` for [`NODE`] with room for `max_pods` pods.
    async fn start(root: &Path, kubeconfig: &Path, max_pods: u32) -> Result<AgentProcess> {
        let agent_root = root.join("agent");
        let log = root.join("agent.log");
        let log_file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let exe = std::env::current_exe().context("finding this executable")?;
        let child = Command::new(&exe)
            .arg("agent")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--node-name", NODE, "--listen", "127.0.0.1:0"])
            .arg("--root-dir")
            .arg(&agent_root)
            .arg("--capacity")
            .arg(format!("pods={max_pods}"))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().context("duplicating the log file")?)
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} agent", exe.display()))?;
        let pid = child.id().context("the agent exited at once")?;
        Ok(AgentProcess {
            child,
            pid,
            root: agent_root,
        })
    }

    /// Fails if the agent has exited.
    fn check_running(&mut self) -> Result<()> {
        match self.child.try_wait().context("checking on the agent")? {
            None => Ok(()),
            Some(status) => bail!("the agent exited ({status})"),
        }
    }

    /// Kills the agent and waits for it.
    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The processes whose environment holds `MARKER=marker`.
fn marked_processes(marker: &str) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&pid| {
            environ(pid).is_some_and(|env| env.iter().any(|(k, v)| k == MARKER && v == marker))
        })
        .collect()
}

/// The agent's shims: processes whose command line names the agent's root directory and
/// `agent-shim`.
fn shim_pids(agent_root: &Path) -> Vec<u32> {
    let root = agent_root.to_string_lossy().into_owned();
    all_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| {
                let cmd = String::from_utf8_lossy(&cmd);
                cmd.contains("agent-shim") && cmd.contains(&root)
            })
        })
        .collect()
}

/// Every process id in `/proc`.
fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The environment of `pid`, if readable.
fn environ(pid: u32) -> Option<Vec<(String, String)>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter_map(|entry| {
                let entry = String::from_utf8_lossy(entry);
                let (k, v) = entry.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .collect(),
    )
}

/// The proportional set size of `pid` (its share of pages it shares with others), in bytes.
fn pss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Pss:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
