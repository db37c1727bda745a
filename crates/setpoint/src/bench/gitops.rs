//! `setpoint bench gitops`: pattern 1 end to end. A `setpoint server` child (roles `apiserver`
//! and `controllers`, so the GitOps loops run in it) follows a local git repository holding
//! `--objects` ConfigMaps (one file each); a Sync applies them into namespace `bench`.
//!
//! Measured, from this process through the HTTPS API:
//! - first full sync: from the Sync's creation (its GitRepository already has an artifact) to
//!   `Ready=True` at that revision (goal ≤ 10 s for 1,000 objects);
//! - a no-op reconcile: from the reconcile request to its `lastHandledReconcileAt`, and how
//!   many ConfigMaps it wrote (resourceVersions before and after; goal ≤ 1 s, zero writes);
//! - commit → applied: `--commits` commits, each changing one ConfigMap's data, from the
//!   `git commit` returning to the new value being served (goal p99 ≤ 2 s);
//! - drift → corrected: `--drifts` hand edits of one ConfigMap, from the edit's answer to the
//!   git value being served again (goal p99 ≤ 1 s).
//!
//! The Sync's and GitRepository's intervals are an hour, so only the local repository watch
//! and the drift watches explain the latencies.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use setpoint_gitops::kinds::{GitRepository, Sync, RECONCILE_REQUESTED_AT};
use setpoint_runtime::Client;

use super::latency::summarize_samples;
use super::machine::Machine;
use super::report::{count, millis, Report, Row};
use super::server::ServerProcess;
use crate::cli::GitopsBenchArgs;

const NS: &str = "bench";
/// How often the benchmark looks at what it waits for.
const POLL: Duration = Duration::from_millis(5);
/// How long any one wait may take before the benchmark fails.
const WAIT: Duration = Duration::from_secs(300);

/// Runs the benchmark and prints its table.
pub(crate) async fn bench_gitops(args: GitopsBenchArgs) -> Result<()> {
    let (objects, commits, drifts) = if args.quick {
        (100, 5, 5)
    } else {
        (args.objects, args.commits, args.drifts)
    };
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-gitops-")
        .tempdir_in(super::default_parent())
        .context("making the benchmark's directory")?;
    let repo = root.path().join("repo");
    make_repository(&repo, objects)?;
    let (server, _) =
        ServerProcess::start(root.path(), &["--roles", "apiserver,controllers"]).await?;
    let result = measure(&server, &repo, objects, commits, drifts).await;
    let log = server.log_tail();
    server.stop().await?;
    let rows = result.with_context(|| log)?;
    let report = Report {
        title: format!(
            "setpoint bench gitops{} (setpoint {})",
            if args.quick { " (quick)" } else { "" },
            env!("CARGO_PKG_VERSION")
        ),
        machine: Machine::describe(root.path()),
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    Ok(())
}

fn configmap(i: usize, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:05}\ndata:\n  value: {value:?}\n")
}

/// Runs `git` in `dir`.
fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@setpoint.invalid",
        ])
        .args(args)
        .output()
        .context("running git")?;
    if !output.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

fn make_repository(repo: &Path, objects: usize) -> Result<()> {
    std::fs::create_dir_all(repo.join("config"))?;
    git(repo, &["init", "-q", "-b", "main"])?;
    for i in 0..objects {
        std::fs::write(
            repo.join(format!("config/cm-{i:05}.yaml")),
            configmap(i, "0"),
        )?;
    }
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", "objects"])
}

/// Polls `check` until it answers `Some`, at most [`WAIT`].
async fn until<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

fn ready_at(sync: &Sync, revision: &str) -> bool {
    sync.status.as_ref().is_some_and(|s| {
        s.last_applied_revision.as_deref() == Some(revision)
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

async fn value_of(configmaps: &kube::Api<ConfigMap>, name: &str) -> Option<String> {
    configmaps.get(name).await.ok()?.data?.get("value").cloned()
}

async fn versions(configmaps: &kube::Api<ConfigMap>) -> Result<BTreeMap<String, String>> {
    Ok(configmaps
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.unwrap_or_default(),
                c.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect())
}

async fn measure(
    server: &ServerProcess,
    repo: &Path,
    objects: usize,
    commits: usize,
    drifts: usize,
) -> Result<Vec<Row>> {
    let client = Client::from_kubeconfig(server.kubeconfig()).await?;
    let kube = client.kube().clone();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    kube::Api::<Namespace>::all(kube.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .context("creating the namespace")?;
    let repositories = kube::Api::<GitRepository>::namespaced(kube.clone(), NS);
    let syncs = kube::Api::<Sync>::namespaced(kube.clone(), NS);
    let configmaps = kube::Api::<ConfigMap>::namespaced(kube.clone(), NS);
    // The loops install their CRDs at start.
    let repository: GitRepository = serde_json::from_value(json!({
        "apiVersion": "gitops.setpoint.dev/v1", "kind": "GitRepository",
        "metadata": {"name": "config", "namespace": NS},
        "spec": {"url": repo.display().to_string(), "interval": "1h", "ref": {"branch": "main"}}
    }))?;
    until("the GitRepository kind is served", || {
        let repositories = repositories.clone();
        let repository = repository.clone();
        async move {
            repositories
                .create(&PostParams::default(), &repository)
                .await
                .ok()
        }
    })
    .await?;
    let revision = until("the GitRepository has an artifact", || {
        let repositories = repositories.clone();
        async move {
            let status = repositories.get("config").await.ok()?.status?;
            Some(status.artifact?.revision)
        }
    })
    .await?;

    let mut rows = Vec::new();
    let sync: Sync = serde_json::from_value(json!({
        "apiVersion": "gitops.setpoint.dev/v1", "kind": "Sync",
        "metadata": {"name": "config", "namespace": NS},
        "spec": {"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": "./config",
            "interval": "1h", "prune": true, "timeout": "5m"}
    }))?;
    let start = Instant::now();
    syncs
        .create(&PostParams::default(), &sync)
        .await
        .context("creating the Sync")?;
    until("the first sync is Ready", || {
        let syncs = syncs.clone();
        let revision = revision.clone();
        async move {
            syncs
                .get("config")
                .await
                .ok()
                .filter(|s| ready_at(s, &revision))
        }
    })
    .await?;
    let first = start.elapsed();
    let applied = versions(&configmaps)
        .await?
        .keys()
        .filter(|n| n.starts_with("cm-"))
        .count();
    let row = Row::new(
        format!("first full sync, {} ConfigMaps", count(objects as u64)),
        format!("{} ({} applied)", millis(first), count(applied as u64)),
    );
    // The goals are for 1,000 objects: a smaller run has no target to meet.
    rows.push(if objects == 1000 {
        row.target("≤ 10 s", first <= Duration::from_secs(10))
    } else {
        row
    });

    let before = versions(&configmaps).await?;
    let requested = format!("bench-{}", std::process::id());
    let start = Instant::now();
    syncs
        .patch(
            "config",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {RECONCILE_REQUESTED_AT: requested}}}),
            ),
        )
        .await?;
    until("the reconcile request is handled", || {
        let syncs = syncs.clone();
        let requested = requested.clone();
        async move {
            let sync = syncs.get("config").await.ok()?;
            (sync.status?.last_handled_reconcile_at.as_deref() == Some(requested.as_str()))
                .then_some(())
        }
    })
    .await?;
    let noop = start.elapsed();
    let after = versions(&configmaps).await?;
    let writes = before
        .iter()
        .filter(|(name, version)| after.get(*name) != Some(*version))
        .count()
        + after
            .keys()
            .filter(|name| !before.contains_key(*name))
            .count();
    let row = Row::new(
        format!("no-op reconcile, {} ConfigMaps", count(objects as u64)),
        format!("{}, {} writes", millis(noop), count(writes as u64)),
    );
    rows.push(if objects == 1000 {
        row.target(
            "≤ 1 s, 0 writes",
            noop <= Duration::from_secs(1) && writes == 0,
        )
    } else {
        row.target("0 writes", writes == 0)
    });

    let mut latencies = Vec::with_capacity(commits);
    for i in 0..commits {
        let value = format!("commit-{i}");
        std::fs::write(repo.join("config/cm-00000.yaml"), configmap(0, &value))?;
        git(repo, &["commit", "-q", "-a", "-m", &value])?;
        let start = Instant::now();
        until("a commit is applied", || {
            let configmaps = configmaps.clone();
            let value = value.clone();
            async move { (value_of(&configmaps, "cm-00000").await? == value).then_some(()) }
        })
        .await?;
        latencies.push(start.elapsed());
    }
    let summary = summarize_samples(&latencies);
    rows.push(
        Row::new(
            "commit → applied",
            format!("{} commits", count(commits as u64)),
        )
        .target("p99 ≤ 2 s", summary.p99 <= Duration::from_secs(2))
        .latency(summary),
    );

    let drifted = if objects > 1 { "cm-00001" } else { "cm-00000" };
    let git_value = value_of(&configmaps, drifted).await.unwrap_or_default();
    let mut latencies = Vec::with_capacity(drifts);
    for i in 0..drifts {
        configmaps
            .patch(
                drifted,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"value": format!("drift-{i}")}})),
            )
            .await?;
        let start = Instant::now();
        until("drift is corrected", || {
            let configmaps = configmaps.clone();
            let git_value = git_value.clone();
            async move { (value_of(&configmaps, drifted).await? == git_value).then_some(()) }
        })
        .await?;
        latencies.push(start.elapsed());
    }
    let summary = summarize_samples(&latencies);
    rows.push(
        Row::new(
            "drift → corrected",
            format!("{} hand edits", count(drifts as u64)),
        )
        .target("p99 ≤ 1 s", summary.p99 <= Duration::from_secs(1))
        .latency(summary),
    );
    Ok(rows)
}
