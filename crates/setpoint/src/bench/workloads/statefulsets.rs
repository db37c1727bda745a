//! A StatefulSet with `podManagementPolicy: Parallel` on simulated nodes: `setpoint server
//! --simulated-nodes N --no-agent` as a child, then through the kube client a StatefulSet
//! created until `readyReplicas` reaches its replicas. The StatefulSet loop, the scheduler
//! and the simulated kubelets all take part. No claim templates: claims need the volume
//! binding of the node agent, which simulated nodes do not do.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use setpoint_runtime::k8s_openapi::api::apps::v1::StatefulSet;
use setpoint_runtime::kube::api::PostParams;
use setpoint_runtime::Client;

use super::simulated::{on_simulated_server, secs};
use crate::bench::report::{self, Row};

const NAMESPACE: &str = "bench";

/// Simulated nodes (each takes up to 200 pods).
const NODES: u32 = 20;

/// The goal for 1,000 replicas.
const TARGET: Duration = Duration::from_secs(20);

/// Runs the benchmark with `replicas` in a server under `root`.
pub(super) async fn bench(root: &Path, replicas: u32) -> Result<Vec<Row>> {
    let nodes = NODES.to_string();
    on_simulated_server(
        root,
        &[
            "--no-agent",
            "--simulated-nodes",
            &nodes,
            "--simulated-node-pods",
            "200",
        ],
        NODES,
        NAMESPACE,
        |client| run(client, replicas),
    )
    .await
}

async fn run(client: Client, replicas: u32) -> Result<Vec<Row>> {
    let api = client.namespaced_api::<StatefulSet>(NAMESPACE);
    let started = Instant::now();
    api.create(&PostParams::default(), &statefulset(replicas))
        .await
        .context("creating the StatefulSet")?;
    let want = i32::try_from(replicas).unwrap_or(i32::MAX);
    let deadline = started + Duration::from_secs(600);
    loop {
        let status = api.get("web").await?.status.unwrap_or_default();
        if status.ready_replicas.unwrap_or_default() >= want {
            break;
        }
        if Instant::now() >= deadline {
            anyhow::bail!("StatefulSet not ready after 600 s: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let mut row = Row::new(
        format!(
            "statefulset of {} (Parallel) on {NODES} simulated nodes: create → all ready",
            report::count(replicas.into())
        ),
        format!(
            "{} s ({} pods/s)",
            secs(elapsed),
            report::rate(replicas.into(), elapsed)
        ),
    );
    if replicas == 1_000 {
        row = row.target(format!("≤ {} s", TARGET.as_secs()), elapsed <= TARGET);
    }
    Ok(vec![row])
}

fn statefulset(replicas: u32) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
                }]}
            }
        }
    }))
    .expect("a well-formed StatefulSet")
}
