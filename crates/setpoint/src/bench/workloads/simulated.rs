//! Deployments on simulated nodes: `setpoint server --simulated-nodes N --no-agent` as a child,
//! then, through the kube client, a Deployment of 5,000 replicas from create to every pod
//! Running and Ready, its deletion, one of 10,000, and a rolling update of that one. Every
//! built-in loop takes part (Deployment → ReplicaSet → scheduler → simulated kubelet), so the
//! figures are the whole pipeline's, over HTTPS, on this machine.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use setpoint_runtime::k8s_openapi::api::apps::v1::Deployment;
use setpoint_runtime::k8s_openapi::api::core::v1::{Namespace, Node};
use setpoint_runtime::kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use setpoint_runtime::Client;

use super::pods::{ready_count, PodTracker, Seen};
use crate::bench::latency::Latencies;
use crate::bench::report::{self, Row};
use crate::bench::server::ServerProcess;

/// The namespace the workloads run in.
const NAMESPACE: &str = "bench";

/// How big a run is.
pub(super) struct Sizes {
    /// Simulated nodes.
    pub(super) nodes: u32,
    /// Pods each node takes (room for a rolling update's surge).
    pub(super) pods_per_node: u32,
    /// The Deployments to apply, in order (the last one is also rolled).
    pub(super) replicas: Vec<u32>,
}

impl Sizes {
    /// The full run, or a quick one.
    pub(super) fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                nodes: 20,
                pods_per_node: 200,
                replicas: vec![1_000],
            }
        } else {
            Sizes {
                nodes: 100,
                pods_per_node: 200,
                replicas: vec![5_000, 10_000],
            }
        }
    }
}

/// The time a Deployment of `replicas` may take to be fully running, by the targets.
fn target_for(replicas: u32) -> Option<Duration> {
    match replicas {
        5_000 => Some(Duration::from_secs(10)),
        10_000 => Some(Duration::from_secs(25)),
        _ => None,
    }
}

/// Runs the benchmark in a server under `root`; returns its rows.
pub(super) async fn bench(root: &Path, quick: bool) -> Result<Vec<Row>> {
    let sizes = Sizes::new(quick);
    let nodes = sizes.nodes.to_string();
    let pods = sizes.pods_per_node.to_string();
    let (mut server, _) = ServerProcess::start(
        root,
        &[
            "--no-agent",
            "--simulated-nodes",
            &nodes,
            "--simulated-node-pods",
            &pods,
        ],
    )
    .await?;
    let outcome = run(&server, &sizes).await;
    let outcome = server.check_running().and(outcome);
    let log = server.log_tail();
    server.stop().await?;
    outcome.with_context(|| log)
}

async fn run(server: &ServerProcess, sizes: &Sizes) -> Result<Vec<Row>> {
    let client = Client::from_kubeconfig(server.kubeconfig())
        .await
        .context("reading the server's kubeconfig")?;
    wait_for_nodes(&client, sizes.nodes).await?;
    client
        .api::<Namespace>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await
        .context("creating the namespace")?;
    let tracker = PodTracker::start(&client, NAMESPACE);
    let deployments = client.namespaced_api::<Deployment>(NAMESPACE);
    let mut rows = Vec::new();
    let last = sizes.replicas.len() - 1;
    for (i, &replicas) in sizes.replicas.iter().enumerate() {
        let app = format!("web-{replicas}");
        let started = Instant::now();
        deployments
            .create(&PostParams::default(), &deployment(&app, replicas))
            .await
            .with_context(|| format!("creating deployment {app}"))?;
        let replicas_usize = replicas as usize;
        tracker
            .wait(&app, Duration::from_secs(300), "all running", |pods| {
                ready_count(pods) >= replicas_usize
            })
            .await?;
        let elapsed = started.elapsed();
        rows.extend(apply_rows(&app, replicas, elapsed, &tracker.of(&app)));

        if i == last {
            rows.push(rolling_update(&deployments, &app, replicas).await?);
        }
        let deleting = Instant::now();
        deployments
            .delete(&app, &DeleteParams::background())
            .await
            .with_context(|| format!("deleting deployment {app}"))?;
        tracker
            .wait(&app, Duration::from_secs(300), "all deleted", |pods| {
                pods.iter().all(|p| p.gone)
            })
            .await?;
        rows.push(Row::new(
            format!(
                "delete deployment of {} (background)",
                report::count(replicas.into())
            ),
            format!(
                "every pod terminating or gone {} s after the delete",
                secs(deleting.elapsed())
            ),
        ));
    }
    Ok(rows)
}

/// The rows of one apply: total time, pods/s, per-pod start latency, bind rate.
fn apply_rows(app: &str, replicas: u32, elapsed: Duration, pods: &[Seen]) -> Vec<Row> {
    let mut latencies = Latencies::new();
    for pod in pods {
        if let Some(ready) = pod.ready {
            latencies.record(ready - pod.created);
        }
    }
    let summary = latencies.summary();
    // Where the start time goes: waiting for the scheduler, then for the simulated kubelet.
    let (mut to_bound, mut to_ready) = (Latencies::new(), Latencies::new());
    for pod in pods {
        if let (Some(bound), Some(ready)) = (pod.bound, pod.ready) {
            to_bound.record(bound - pod.created);
            to_ready.record(ready - bound);
        }
    }
    let mut apply = Row::new(
        format!(
            "apply deployment of {} → all Running+Ready",
            report::count(replicas.into())
        ),
        format!(
            "{} s ({} pods/s)",
            secs(elapsed),
            report::rate(replicas.into(), elapsed)
        ),
    );
    if let Some(target) = target_for(replicas) {
        apply = apply.target(format!("≤ {} s", target.as_secs()), elapsed <= target);
    }
    let binds: Vec<_> = pods.iter().filter_map(|p| p.bound).collect();
    let bind_row = match (binds.iter().min(), binds.iter().max()) {
        (Some(first), Some(last)) if binds.len() > 1 => Row::new(
            format!("{app}: scheduler binds, first to last"),
            format!(
                "{} pods/s ({} pods in {} s)",
                report::rate(binds.len() as u64, *last - *first),
                report::count(binds.len() as u64),
                secs(*last - *first)
            ),
        )
        .target(
            "≥ 1,000 pods/s",
            report::per_second(binds.len() as u64, *last - *first) >= 1000,
        ),
        _ => Row::new(format!("{app}: scheduler binds"), "too few to measure"),
    };
    vec![
        apply,
        Row::new(
            format!("{app}: per-pod start (created → seen Running+Ready)"),
            format!("{} pods", report::count(summary.count)),
        )
        .latency(summary)
        .target("p99 ≤ 1 s", summary.p99 <= Duration::from_secs(1)),
        Row::new(
            format!("{app}: of which created → seen bound"),
            format!("{} pods", report::count(to_bound.summary().count)),
        )
        .latency(to_bound.summary()),
        Row::new(
            format!("{app}: of which seen bound → seen Running+Ready"),
            format!("{} pods", report::count(to_ready.summary().count)),
        )
        .latency(to_ready.summary()),
        bind_row,
    ]
}

/// Changes the template of `app` and waits for the rollout to finish as `kubectl rollout
/// status` judges it.
async fn rolling_update(
    deployments: &setpoint_runtime::kube::Api<Deployment>,
    app: &str,
    replicas: u32,
) -> Result<Row> {
    let started = Instant::now();
    let patched = deployments
        .patch(
            app,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {
                "bench.setpoint.dev/rollout": "1"
            }}}}})),
        )
        .await
        .with_context(|| format!("changing the template of {app}"))?;
    let generation = patched.metadata.generation.unwrap_or_default();
    let deadline = started + Duration::from_secs(600);
    loop {
        let d = deployments.get(app).await?;
        let status = d.status.unwrap_or_default();
        let want = i32::try_from(replicas).unwrap_or(i32::MAX);
        if status.observed_generation.unwrap_or_default() >= generation
            && status.updated_replicas.unwrap_or_default() >= want
            && status.replicas.unwrap_or_default() <= status.updated_replicas.unwrap_or_default()
            && status.available_replicas.unwrap_or_default() >= want
        {
            break;
        }
        if Instant::now() >= deadline {
            anyhow::bail!("{app}: rollout not done after 600 s: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    Ok(Row::new(
        format!(
            "rolling update of {} (25% surge/unavailable)",
            report::count(replicas.into())
        ),
        format!(
            "{} s to rolled out ({} pods/s replaced)",
            secs(elapsed),
            report::rate(replicas.into(), elapsed)
        ),
    ))
}

/// A Deployment of `replicas` pods labelled `app=<app>`, with small requests so they fit.
fn deployment(app: &str, replicas: u32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": app},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.example/app:1",
                    "command": ["sleep", "86400"],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
                }]}
            }
        }
    }))
    .expect("a well-formed Deployment")
}

/// Runs `run` against a `setpoint server` child started under `root` with `args`, once `nodes`
/// simulated nodes are Ready and the namespace `namespace` exists; the server is stopped
/// afterwards whatever happened, and its log's tail is attached to an error.
pub(super) async fn on_simulated_server<F, Fut>(
    root: &Path,
    args: &[&str],
    nodes: u32,
    namespace: &str,
    run: F,
) -> Result<Vec<Row>>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Row>>>,
{
    let (mut server, _) = ServerProcess::start(root, args).await?;
    let outcome = async {
        let client = Client::from_kubeconfig(server.kubeconfig())
            .await
            .context("reading the server's kubeconfig")?;
        wait_for_nodes(&client, nodes).await?;
        client
            .api::<Namespace>()
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": namespace}}))?,
            )
            .await
            .context("creating the namespace")?;
        run(client).await
    }
    .await;
    let outcome = server.check_running().and(outcome);
    let log = server.log_tail();
    server.stop().await?;
    outcome.with_context(|| log)
}

/// Waits until `count` nodes are Ready.
pub(super) async fn wait_for_nodes(client: &Client, count: u32) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let nodes = client.api::<Node>().list(&ListParams::default()).await?;
        let ready = nodes
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= count as usize {
            return Ok(());
        }
        if Instant::now() >= deadline {
            anyhow::bail!("{ready} of {count} simulated nodes Ready after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Seconds with two decimals.
pub(super) fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}
