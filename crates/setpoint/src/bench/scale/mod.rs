//! `setpoint bench scale` (issue 23): a store growing as a user's cluster would. One `setpoint
//! server --no-agent --controllers=` child (on the embedded store, or on a local etcd member
//! with `--store etcd`) is sent 1 KiB ConfigMaps from `--clients` HTTPS clients in steps up to
//! `--objects`; at each step it measures creates/s and their latencies, a sample of updates and
//! of deletes (re-created after), the server's RSS and peak against the bytes stored, the
//! store's size on disk, a restart (SIGTERM, the same data directory and address) to `/readyz`
//! ok and to the first full list with the 5xx answers before it, the RSS at rest after it, and
//! a paged list against a whole one. See `docs/benchmarks.md`, "Scale (issue 23)".
//!
//! The server (and etcd) are stopped and the data directory deleted when the command ends,
//! fails or is interrupted (Ctrl-C). A step that fails ends the run; the steps before it are
//! reported.

mod backend;
mod plan;
mod restart;
mod rows;
mod step;
mod writes;

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

use self::backend::Backend;
use self::plan::Plan;
use self::rows::FirstRates;
use self::step::Bench;
use super::api::client::Client;
use super::machine::Machine;
use super::report::{self, Report, Row};
use super::server::ServerProcess;
use crate::cli::ScaleBenchArgs;

/// How long the first server may take to answer `/readyz` once it has written its kubeconfig.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the empty server is left alone before its RSS is read as the base.
const SETTLE: Duration = Duration::from_secs(1);

/// Runs `setpoint bench scale` and prints its results, as text and as markdown.
pub(crate) async fn bench_scale(args: ScaleBenchArgs) -> Result<()> {
    let plan = Plan::from_args(&args)?;
    let parent = args.dir.clone().unwrap_or_else(super::default_parent);
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-scale-")
        .tempdir_in(&parent)
        .with_context(|| format!("creating a temporary directory in {}", parent.display()))?;
    let machine = Machine::describe(root.path());
    eprintln!(
        "growing a store to {} ConfigMaps in {}",
        report::count(plan.steps.last().copied().unwrap_or_default()),
        root.path().display()
    );
    eprintln!("{machine}");

    let started = Instant::now();
    // Dropping the run on Ctrl-C drops the server process (killing it) and the etcd member.
    let outcome = tokio::select! {
        outcome = run(root.path(), &args, &plan) => outcome,
        interrupted = tokio::signal::ctrl_c() => {
            interrupted.context("waiting for Ctrl-C")?;
            bail!("interrupted");
        }
    };
    let (label, rows, failure) = outcome?;
    root.close()
        .context("deleting the benchmark's data directory")?;

    let report = Report {
        title: format!(
            "setpoint bench scale{} on the {label}, {} clients (setpoint {}, {:.0} s)",
            if args.quick { " --quick" } else { "" },
            args.clients,
            env!("CARGO_PKG_VERSION"),
            started.elapsed().as_secs_f64()
        ),
        machine,
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    match failure {
        Some(error) => Err(error.context("a step failed")),
        None => Ok(()),
    }
}

/// Starts the store and the server, runs every step and stops them; returns the store's label,
/// the rows and the error that ended the run early, if one did.
async fn run(
    root: &Path,
    args: &ScaleBenchArgs,
    plan: &Plan,
) -> Result<(&'static str, Vec<Row>, Option<anyhow::Error>)> {
    let backend = Backend::start(args.store, root).await?;
    let label = backend.label();
    let mut server_args = vec!["--no-agent".to_owned(), "--controllers=".to_owned()];
    server_args.extend(backend.server_args());
    server_args.extend(args.server_args.iter().cloned());
    let arg_refs: Vec<&str> = server_args.iter().map(String::as_str).collect();
    let (server, endpoint) = ServerProcess::start(root, &arg_refs).await?;
    let client = Client::new(endpoint.clone())?;
    let ready = tokio::time::timeout(READY_TIMEOUT, restart::poll_ready(&client, Instant::now()));
    if ready.await.is_err() {
        bail!(
            "the server was not ready within {READY_TIMEOUT:?}; {}",
            server.log_tail()
        );
    }
    tokio::time::sleep(SETTLE).await;
    let base = super::usage::rss_bytes(server.pid())?;
    eprintln!(
        "server pid {} ready; RSS {} empty",
        server.pid(),
        report::mib(base)
    );
    let mut rows = vec![Row::new("empty server: RSS (the base)", report::mib(base))];

    let mut bench = Bench {
        root,
        backend: &backend,
        endpoint,
        client,
        args: server_args.clone(),
        clients: usize::from(args.clients),
        stored: 0,
        stored_bytes: Arc::new(AtomicU64::new(0)),
    };
    let mut server = Some(server);
    let mut first: Option<FirstRates> = None;
    let mut failure = None;
    let last = plan.steps.len() - 1;
    for (i, &size) in plan.steps.iter().enumerate() {
        let Some(current) = server.take() else { break };
        match bench.step(current, size, plan).await {
            Ok((measured, restarted)) => {
                server = Some(restarted);
                let held_to = if i == last { first } else { None };
                let step_rows = rows::rows(&measured, held_to, base);
                for row in &step_rows {
                    eprintln!("  {}: {}", row.name, row.result);
                }
                rows.extend(step_rows);
                first.get_or_insert(FirstRates::of(&measured));
            }
            Err(error) => {
                eprintln!("[{}] FAILED: {error:#}", report::count(size));
                let first_line = format!("{error:#}").lines().next().unwrap_or("").to_owned();
                rows.push(Row::new(
                    format!("{}: step", report::count(size)),
                    format!("FAILED: {first_line}"),
                ));
                failure = Some(error);
                break;
            }
        }
    }
    if let Some(server) = server {
        server.stop().await?;
    }
    drop(bench);
    backend.stop().await?;
    Ok((label, rows, failure))
}
