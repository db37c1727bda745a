//! `setpoint bench api`: the API server measured the way clients load it — over real HTTPS,
//! from a separate process. It starts `setpoint server` (this executable) as a child on a fresh
//! data directory and a free loopback port, reads the admin kubeconfig the server writes, and
//! runs ConfigMap creates, gets, lists and watches against it with a rustls client, recording
//! latencies, the server's CPU time per operation and the load generator's own share of the
//! CPU (both run on the same machine), and the server's resident memory.
//!
//! The benchmarks run in order against the one server, so later ones see the objects earlier
//! ones created. The server is killed when the command ends, fails or is interrupted (Ctrl-C),
//! and its data directory deleted. A benchmark that fails is reported in the table and makes
//! the command fail, after the others have run.

mod apply;
pub(super) mod client;
mod creates;
mod gets;
pub(super) mod list;
pub(super) mod load;
mod locks;
mod secrets;
mod watch;
mod watcher;
mod webhook;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

use self::client::{Call, Client, Protocol};
use super::machine::Machine;
use super::report::{self, Report, Row};
use super::server::ServerProcess;
use crate::cli::{ApiBench, ApiBenchArgs};

/// The most resident memory an idle server may use.
const IDLE_RSS_TARGET: u64 = 100 << 20;
/// How long the server may take to answer `/readyz` once it has written its kubeconfig.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// What the benchmarks share: the server, a client for it, and the sizes to run.
pub(super) struct Harness {
    /// The server under test.
    server: ServerProcess,
    /// Connects to it.
    client: Client,
    /// How much work to do.
    sizes: load::Sizes,
    /// How many ConfigMaps `creates` left in `default`, named [`creates::PREFIX`]`-<i>`, for
    /// the gets to read (0 when it did not run).
    created: u64,
    /// How many ConfigMaps the benchmarks have created so far, in all namespaces.
    objects: u64,
    /// Writers in the live watch run.
    watch_writers: usize,
}

/// Runs `setpoint bench api` and prints its results, as text and as markdown.
pub(crate) async fn bench_api(args: ApiBenchArgs) -> Result<()> {
    let parent = args.dir.clone().unwrap_or_else(super::default_parent);
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-api-")
        .tempdir_in(&parent)
        .with_context(|| format!("creating a temporary directory in {}", parent.display()))?;
    let machine = Machine::describe(root.path());
    eprintln!("benchmarking the API server in {}", root.path().display());
    eprintln!("{machine}");

    // Dropping the benchmark future on Ctrl-C drops the server process, which kills it.
    let outcome = tokio::select! {
        outcome = run_all(root.path(), &args) => outcome,
        interrupted = tokio::signal::ctrl_c() => {
            interrupted.context("waiting for Ctrl-C")?;
            bail!("interrupted");
        }
    };
    let (rows, failed) = outcome?;
    root.close()
        .context("deleting the benchmark's data directory")?;

    let report = Report {
        title: format!(
            "setpoint bench api{} (setpoint {})",
            if args.quick { " --quick" } else { "" },
            env!("CARGO_PKG_VERSION")
        ),
        machine,
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    if failed > 0 {
        bail!("{failed} API benchmark(s) failed");
    }
    Ok(())
}

/// Starts the server, runs the selected benchmarks against it and stops it; returns the rows
/// and how many benchmarks failed.
async fn run_all(root: &Path, args: &ApiBenchArgs) -> Result<(Vec<Row>, usize)> {
    let extra: Vec<&str> = args.server_args.iter().map(String::as_str).collect();
    let (server, endpoint) = ServerProcess::start(root, &extra).await?;
    let client = Client::new(endpoint)?;
    let mut harness = Harness {
        server,
        client,
        sizes: load::Sizes::new(args.quick),
        created: 0,
        objects: 0,
        watch_writers: usize::from(args.watch_writers),
    };
    wait_ready(&harness.client)
        .await
        .with_context(|| harness.server.log_tail())?;
    let idle_rss = super::usage::rss_bytes(harness.server.pid())?;
    eprintln!("server pid {} ready", harness.server.pid());

    let mut rows = Vec::new();
    let mut failed = 0;
    for bench in super::selected(&ApiBench::ALL, &args.only) {
        let result = match bench {
            ApiBench::Creates => creates::bench_creates(&mut harness).await,
            ApiBench::Gets => gets::bench_gets(&mut harness).await,
            ApiBench::List => list::bench_list(&mut harness).await,
            ApiBench::Watch => watch::bench_watch(&mut harness).await,
            ApiBench::Apply => apply::bench_apply(&mut harness).await,
            ApiBench::Webhook => webhook::bench_webhook(&mut harness).await,
            ApiBench::Secrets => secrets::bench_secrets(&harness, root).await,
            ApiBench::Locks => locks::bench_locks(&harness, root).await,
            ApiBench::Idle => idle_rows(&harness, idle_rss),
        };
        // A server that died explains a failure better than what the client saw.
        let result = harness.server.check_running().and(result);
        match result {
            Ok(more) => rows.extend(more),
            Err(error) => {
                eprintln!("[{bench:?}] FAILED: {error:#}");
                let first_line = format!("{error:#}").lines().next().unwrap_or("").to_owned();
                rows.push(Row::new(
                    format!("{bench:?}").to_lowercase(),
                    format!("FAILED: {first_line}"),
                ));
                failed += 1;
                if harness.server.check_running().is_err() {
                    eprintln!("the server is gone; skipping the remaining benchmarks");
                    break;
                }
            }
        }
    }
    harness.server.stop().await?;
    Ok((rows, failed))
}

/// Waits until the server answers `GET /readyz` with 200, retrying failed connections.
async fn wait_ready(client: &Client) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let attempt = async {
            let mut connection = client.connect(Protocol::Http1).await?;
            connection.call(Call::get("/readyz")).await
        };
        match attempt.await {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => {
                return Err(
                    error.context(format!("the server is not ready after {READY_TIMEOUT:?}"))
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The server's resident memory right after it started and now, after the benchmarks that
/// ran before this one (with the objects they created still stored).
fn idle_rows(harness: &Harness, idle_rss: u64) -> Result<Vec<Row>> {
    let now = super::usage::rss_bytes(harness.server.pid())?;
    Ok(vec![
        Row::new("idle: server RSS after start", report::mib(idle_rss))
            .target("< 100 MiB", idle_rss < IDLE_RSS_TARGET),
        Row::new(
            "idle: server RSS after the benchmarks above",
            format!(
                "{} ({} ConfigMaps stored)",
                report::mib(now),
                report::count(harness.objects)
            ),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_should_keep_canonical_order_without_duplicates() {
        assert_eq!(super::super::selected(&ApiBench::ALL, &[]), ApiBench::ALL);
        let only = [ApiBench::Idle, ApiBench::Creates, ApiBench::Idle];
        assert_eq!(
            super::super::selected(&ApiBench::ALL, &only),
            [ApiBench::Creates, ApiBench::Idle]
        );
    }
}
