//! `setpoint gitops`: look at and drive the GitOps loops of a cluster from a kubeconfig.
//!
//! - `diff NAME` prints what a reconcile of the Sync would change — every object's dry-run
//!   apply against the live object as a unified diff (as `kubectl diff`), and the objects a
//!   prune would delete — and exits 1 when there are differences, 0 when there are none, 2 on
//!   an error (as `kubectl diff`). The files come from `--path DIR`, or else from the Sync's
//!   source: its repository cloned with `git` at the revision its artifact holds.
//! - `reconcile NAME` sets the reconcile-request annotation and waits until the loop has
//!   handled it, then prints the Sync's `Ready` condition (exit 1 when it is not `True`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use setpoint_gitops::kinds::{GitRepository, Sync, RECONCILE_REQUESTED_AT};
use setpoint_gitops::sync::Pending;
use setpoint_runtime::Client;

/// How often `reconcile` looks at the Sync while waiting.
const POLL: Duration = Duration::from_millis(200);

/// The `setpoint gitops` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum GitopsCommand {
    /// Print what a reconcile of a Sync would change (exit 1 if anything, as `kubectl diff`).
    Diff(DiffArgs),
    /// Ask for a reconcile of a Sync now and wait until it is done.
    Reconcile(ReconcileArgs),
}

/// Which Sync, and where its cluster is.
#[derive(Debug, Args)]
pub(crate) struct SyncTarget {
    /// The Sync's name.
    pub(crate) name: String,
    /// Its namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub(crate) namespace: String,
    /// The kubeconfig (default: `KUBECONFIG`, then `~/.kube/config`).
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
}

/// Flags of `setpoint gitops diff`.
#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The Sync.
    #[command(flatten)]
    pub(crate) target: SyncTarget,
    /// Build this local directory (the one the Sync's `spec.path` would name) instead of the
    /// source's files.
    #[arg(long, value_name = "DIR")]
    pub(crate) path: Option<PathBuf>,
}

/// Flags of `setpoint gitops reconcile`.
#[derive(Debug, Args)]
pub(crate) struct ReconcileArgs {
    /// The Sync.
    #[command(flatten)]
    pub(crate) target: SyncTarget,
    /// How long to wait for the loop.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::cli::parse_duration)]
    pub(crate) timeout: Duration,
}

/// Runs one `setpoint gitops` subcommand; its exit status.
pub(crate) async fn gitops(command: GitopsCommand) -> Result<ExitCode> {
    match command {
        GitopsCommand::Diff(args) => Ok(match diff(&args).await {
            Ok(true) => ExitCode::from(1),
            Ok(false) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("setpoint: error: {error:#}");
                ExitCode::from(2)
            }
        }),
        GitopsCommand::Reconcile(args) => reconcile(&args).await,
    }
}

async fn client(target: &SyncTarget) -> Result<Client> {
    Ok(match &target.kubeconfig {
        Some(path) => Client::from_kubeconfig(path).await?,
        None => Client::infer().await?,
    })
}

/// Prints the diff; whether anything differs.
async fn diff(args: &DiffArgs) -> Result<bool> {
    let target = &args.target;
    let client = client(target).await?;
    let syncs = kube::Api::<Sync>::namespaced(client.kube().clone(), &target.namespace);
    let mut sync = syncs
        .get(&target.name)
        .await
        .with_context(|| format!("reading Sync {}/{}", target.namespace, target.name))?;
    let checkout;
    let root: &Path = match &args.path {
        Some(path) => {
            sync.spec.path = None;
            path
        }
        None => {
            checkout = source_checkout(&client, &sync).await?;
            checkout.path()
        }
    };
    let diffs = setpoint_gitops::sync::diff(&client, &sync, root)
        .await
        .context("computing the diff")?;
    let mut refused = Vec::new();
    for d in &diffs {
        match &d.pending {
            Pending::Refused(message) => refused.push(format!("{}: {message}", d.object)),
            pending => {
                let what = match pending {
                    Pending::Create => "created",
                    Pending::Configure => "configured",
                    _ => "pruned",
                };
                println!("# {} would be {what}", d.object);
                print!("{}", d.diff);
            }
        }
    }
    if !refused.is_empty() {
        bail!("the API refuses: {}", refused.join("; "));
    }
    Ok(!diffs.is_empty())
}

/// The Sync's source files at the revision of its current artifact, cloned with `git`.
async fn source_checkout(client: &Client, sync: &Sync) -> Result<tempfile::TempDir> {
    let reference = &sync.spec.source_ref;
    let namespace = sync.source_namespace();
    let repositories = kube::Api::<GitRepository>::namespaced(client.kube().clone(), &namespace);
    let repository = repositories
        .get(&reference.name)
        .await
        .with_context(|| format!("reading GitRepository {namespace}/{}", reference.name))?;
    let revision = repository
        .status
        .as_ref()
        .and_then(|s| s.artifact.as_ref())
        .map(|a| a.revision.clone())
        .with_context(|| {
            format!(
                "GitRepository {namespace}/{} has no artifact yet (use --path)",
                reference.name
            )
        })?;
    let sha = revision
        .rsplit_once("sha1:")
        .map(|(_, sha)| sha.to_owned())
        .with_context(|| format!("revision {revision:?} names no commit"))?;
    let dir = tempfile::tempdir().context("making a temporary directory")?;
    let git = |args: Vec<std::ffi::OsString>| async move {
        let output = tokio::process::Command::new("git")
            .args(&args)
            .output()
            .await
            .context("running git")?;
        if !output.status.success() {
            bail!(
                "git {}: {}",
                args.first()
                    .map(|a| a.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    };
    git(vec![
        "clone".into(),
        "--quiet".into(),
        "--no-checkout".into(),
        repository.spec.url.clone().into(),
        dir.path().into(),
    ])
    .await
    .with_context(|| {
        format!(
            "cloning {} (use --path for a repository that needs credentials)",
            repository.spec.url
        )
    })?;
    git(vec![
        "-C".into(),
        dir.path().into(),
        "checkout".into(),
        "--quiet".into(),
        sha.into(),
    ])
    .await?;
    Ok(dir)
}

/// Sets the annotation, waits, prints `Ready`.
async fn reconcile(args: &ReconcileArgs) -> Result<ExitCode> {
    let target = &args.target;
    let client = client(target).await?;
    let syncs = kube::Api::<Sync>::namespaced(client.kube().clone(), &target.namespace);
    let requested = k8s_openapi::jiff::Timestamp::now().to_string();
    syncs
        .patch(
            &target.name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {RECONCILE_REQUESTED_AT: requested}}}),
            ),
        )
        .await
        .with_context(|| format!("annotating Sync {}/{}", target.namespace, target.name))?;
    let deadline = tokio::time::Instant::now() + args.timeout;
    loop {
        let sync = syncs.get(&target.name).await.context("reading the Sync")?;
        let status = sync.status.unwrap_or_default();
        if status.last_handled_reconcile_at.as_deref() == Some(requested.as_str()) {
            let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
            return Ok(match ready {
                Some(c) if c.status == "True" => {
                    println!("✔ {}", c.message);
                    ExitCode::SUCCESS
                }
                Some(c) => {
                    println!("✗ {}: {}", c.reason, c.message);
                    ExitCode::from(1)
                }
                None => {
                    println!("✗ no Ready condition");
                    ExitCode::from(1)
                }
            });
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the sync loop did not handle the request within {:?} (is it running?)",
                args.timeout
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    use super::GitopsCommand;

    #[test]
    fn gitops_subcommands_should_parse_their_flags() {
        let cli = Cli::try_parse_from([
            "setpoint", "gitops", "diff", "apps", "-n", "flux", "--path", "./apps",
        ])
        .expect("parses");
        let Command::Gitops(GitopsCommand::Diff(args)) = cli.command else {
            panic!("not gitops diff");
        };
        assert_eq!(
            (args.target.name.as_str(), args.target.namespace.as_str()),
            ("apps", "flux")
        );
        assert_eq!(args.path.as_deref(), Some(std::path::Path::new("./apps")));
        let cli = Cli::try_parse_from([
            "setpoint",
            "gitops",
            "reconcile",
            "apps",
            "--timeout",
            "30s",
        ])
        .expect("parses");
        let Command::Gitops(GitopsCommand::Reconcile(args)) = cli.command else {
            panic!("not gitops reconcile");
        };
        assert_eq!(args.target.namespace, "default");
        assert_eq!(args.timeout, std::time::Duration::from_secs(30));
    }
}
