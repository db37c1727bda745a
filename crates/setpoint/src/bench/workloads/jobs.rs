//! A Job on simulated nodes: `setpoint server --simulated-nodes N --no-agent` as a child, then,
//! through the kube client, a (NonIndexed) Job of 10,000 completions, 500 at a
//! time, timed from create to its `Complete` condition. Each pod "runs" for
//! [`RUN_TIME`] on its simulated node and exits 0, so the figure is the whole pipeline's — Job
//! loop (creates, finalizer-based tracking), scheduler, simulated kubelet — over HTTPS.
//! `--quick` runs 1,000 completions.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use setpoint_runtime::k8s_openapi::api::batch::v1::Job;
use setpoint_runtime::kube::api::PostParams;
use setpoint_runtime::Client;

use super::simulated::{on_simulated_server, secs};
use crate::bench::report::{self, Row};

/// The namespace the Job runs in.
const NAMESPACE: &str = "bench-jobs";
/// How long each pod runs on its simulated node.
const RUN_TIME: &str = "100ms";
/// Pods at once.
const PARALLELISM: u32 = 500;
/// Simulated nodes, and pods each takes.
const NODES: u32 = 50;
const PODS_PER_NODE: u32 = 200;
/// The target for 10,000 completions.
const TARGET: Duration = Duration::from_secs(30);

/// Runs the benchmark in a server under `root`; returns its rows.
pub(super) async fn bench(root: &Path, quick: bool) -> Result<Vec<Row>> {
    let completions = if quick { 1_000 } else { 10_000 };
    let nodes = NODES.to_string();
    let pods = PODS_PER_NODE.to_string();
    on_simulated_server(
        root,
        &[
            "--no-agent",
            "--simulated-nodes",
            &nodes,
            "--simulated-node-pods",
            &pods,
        ],
        NODES,
        NAMESPACE,
        |client| run(client, completions),
    )
    .await
}

async fn run(client: Client, completions: u32) -> Result<Vec<Row>> {
    let jobs = client.namespaced_api::<Job>(NAMESPACE);
    let started = Instant::now();
    jobs.create(&PostParams::default(), &job(completions))
        .await
        .context("creating the job")?;
    let limit = Duration::from_secs(600);
    let status = loop {
        let job = jobs.get("batch").await.context("reading the job")?;
        let status = job.status.unwrap_or_default();
        let done = status
            .conditions
            .iter()
            .flatten()
            .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
        if let Some(c) = done {
            if c.type_ == "Failed" {
                bail!("the job failed: {:?}", c.message);
            }
            break status;
        }
        if started.elapsed() > limit {
            bail!(
                "the job did not complete in {} s ({:?} succeeded)",
                limit.as_secs(),
                status.succeeded
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let elapsed = started.elapsed();
    let succeeded = status.succeeded.unwrap_or(0);
    let mut row = Row::new(
        format!(
            "job of {} completions, parallelism {PARALLELISM} ({NODES} simulated nodes, pods run {RUN_TIME})",
            report::count(completions.into())
        ),
        format!(
            "Complete {} s after the create, {succeeded} succeeded, {} completions/s",
            secs(elapsed),
            report::rate(u64::from(completions), elapsed)
        ),
    );
    if completions == 10_000 {
        row = row.target(format!("≤ {} s", TARGET.as_secs()), elapsed <= TARGET);
    }
    Ok(vec![row])
}

/// The Job: `completions` pods that each run [`RUN_TIME`] and succeed.
fn job(completions: u32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch"},
        "spec": {
            "completions": completions,
            "parallelism": PARALLELISM,
            "template": {
                "metadata": {"annotations": {"setpoint.dev/simulated-run-time": RUN_TIME}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "work", "image": "busybox"}],
                },
            },
        },
    }))
    .expect("a well-formed Job")
}
