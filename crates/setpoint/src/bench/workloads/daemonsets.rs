//! A DaemonSet over simulated nodes: `setpoint server --simulated-nodes N --no-agent` as a
//! child, then through the kube client a DaemonSet created until every node runs an available
//! pod (as `kubectl rollout status` judges it), and a rolling update (`maxUnavailable: 10%`)
//! until every node runs an updated, available pod. The DaemonSet loop, the scheduler (every
//! pod carries a `matchFields metadata.name` term) and the simulated kubelets all take part.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use setpoint_runtime::k8s_openapi::api::apps::v1::DaemonSet;
use setpoint_runtime::kube::api::{Patch, PatchParams, PostParams};
use setpoint_runtime::kube::Api;
use setpoint_runtime::Client;

use super::simulated::{on_simulated_server, secs};
use crate::bench::report::{self, Row};

const NAMESPACE: &str = "bench";

/// The goal for each phase.
const TARGET: Duration = Duration::from_secs(30);

/// Runs the benchmark over `nodes` simulated nodes in a server under `root`.
pub(super) async fn bench(root: &Path, nodes: u32) -> Result<Vec<Row>> {
    let count = nodes.to_string();
    on_simulated_server(
        root,
        &["--no-agent", "--simulated-nodes", &count],
        nodes,
        NAMESPACE,
        |client| run(client, nodes),
    )
    .await
}

async fn run(client: Client, nodes: u32) -> Result<Vec<Row>> {
    let api = client.namespaced_api::<DaemonSet>(NAMESPACE);
    let n = report::count(nodes.into());

    let started = Instant::now();
    let created = api
        .create(&PostParams::default(), &daemonset())
        .await
        .context("creating the DaemonSet")?;
    wait_rolled_out(&api, created.metadata.generation.unwrap_or(1), nodes).await?;
    let create = started.elapsed();

    let started = Instant::now();
    let patched = api
        .patch(
            "agent",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {
                "bench.setpoint.dev/rollout": "1"
            }}}}})),
        )
        .await
        .context("changing the template")?;
    wait_rolled_out(&api, patched.metadata.generation.unwrap_or(2), nodes).await?;
    let roll = started.elapsed();
    Ok(vec![
        Row::new(
            format!("daemonset over {n} simulated nodes: create → all available"),
            format!("{} s ({} pods/s)", secs(create), report::rate(nodes.into(), create)),
        )
        .target(format!("≤ {} s", TARGET.as_secs()), create <= TARGET),
        Row::new(
            format!("daemonset over {n} nodes: rolling update (maxUnavailable 10%) → all updated and available"),
            format!("{} s ({} pods/s replaced)", secs(roll), report::rate(nodes.into(), roll)),
        )
        .target(format!("≤ {} s", TARGET.as_secs()), roll <= TARGET),
    ])
}

/// Waits until the DaemonSet at `generation` runs an updated, available pod on `nodes` nodes
/// (`kubectl rollout status`'s test).
async fn wait_rolled_out(api: &Api<DaemonSet>, generation: i64, nodes: u32) -> Result<()> {
    let want = i32::try_from(nodes).unwrap_or(i32::MAX);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let status = api.get("agent").await?.status.unwrap_or_default();
        if status.observed_generation.unwrap_or_default() >= generation
            && status.desired_number_scheduled >= want
            && status.updated_number_scheduled.unwrap_or_default() >= want
            && status.number_available.unwrap_or_default() >= want
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            anyhow::bail!("DaemonSet not rolled out after 600 s: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn daemonset() -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{
                    "name": "agent",
                    "image": "registry.example/agent:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
                }]}
            }
        }
    }))
    .expect("a well-formed DaemonSet")
}
