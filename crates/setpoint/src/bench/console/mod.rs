//! `setpoint bench console`: the web console's budget (issue 24, docs/console.md). A `setpoint
//! server` child (`--no-agent --controllers=`: nothing but the API, so every CPU second it spends
//! is the API's) holds `--pods` pods; `bench.mjs` (beside this file, run with `node` and
//! playwright-core in Debian's headless Chromium) opens the console's objects page on them.
//!
//! Measured:
//! - load: a fresh document at the pods list until it shows every pod (the count) and its
//!   first rows, `--loads` times (goal ≤ 1 s);
//! - responsiveness while `--rate` pods change per second (a status patch each, as a node agent
//!   writes): a probe into the page's main thread every 100 ms (goal p99 ≤ 100 ms, a user's
//!   "instant"), the gaps between animation frames, long tasks, the time each batch of watch
//!   events takes to apply, and how long after the changes stop the page has applied them all;
//! - the server's CPU with and without the browser, idle and under the same changes (goal: the
//!   console adds ≤ 5 %).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::api::client::{Call, Client, Protocol};
use super::kubeconfig::Endpoint;
use super::latency::summarize_samples;
use super::machine::Machine;
use super::report::{count, millis, Report, Row};
use super::server::ServerProcess;
use super::usage::{CpuUse, Meter};
use crate::cli::ConsoleBenchArgs;

/// The browser side, written next to the benchmark's data and run with `node`.
const SCRIPT: &str = include_str!("bench.mjs");
const NS: &str = "bench";
/// Connections creating the pods.
const CREATORS: usize = 16;
/// Connections sending the changes.
const CHANGERS: usize = 8;
/// Each phase of a pair of [`measure`]'s CPU phases.
const PAIR_PHASE: Duration = Duration::from_secs(5);
/// How long the browser may take for anything it is asked.
const BROWSER_WAIT: Duration = Duration::from_secs(300);

/// Runs the benchmark and prints its table.
pub(crate) async fn bench_console(args: ConsoleBenchArgs) -> Result<()> {
    let (chromium, playwright) = tools(&args)?;
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-console-")
        .tempdir_in(super::default_parent())
        .context("making the benchmark's directory")?;
    let (server, endpoint) =
        ServerProcess::start(root.path(), &["--no-agent", "--controllers="]).await?;
    let result = measure(
        &server,
        endpoint,
        &args,
        &chromium,
        &playwright,
        root.path(),
    )
    .await;
    let log = server.log_tail();
    server.stop().await?;
    let rows = result.with_context(|| log)?;
    let report = Report {
        title: format!(
            "setpoint bench console, {} pods, {} changes/s (setpoint {}, {} build)",
            count(args.pods),
            count(args.rate),
            env!("CARGO_PKG_VERSION"),
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
        ),
        machine: Machine::describe(root.path()),
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    Ok(())
}

/// Chromium and playwright-core, where `scripts/check` installs them.
fn tools(args: &ConsoleBenchArgs) -> Result<(PathBuf, PathBuf)> {
    let install = "scripts/check installs them: chromium with apt, playwright-core with \
                   `npm install --prefix target/console-node playwright-core@1`";
    let chromium = args
        .chromium
        .clone()
        .or_else(|| std::env::var_os("SETPOINT_CHROMIUM").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    ensure!(
        chromium.exists(),
        "no Chromium at {} ({install})",
        chromium.display()
    );
    let playwright = args
        .playwright_dir
        .clone()
        .or_else(|| std::env::var_os("SETPOINT_PLAYWRIGHT_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target/console-node"));
    ensure!(
        playwright
            .join("node_modules/playwright-core/package.json")
            .exists(),
        "no playwright-core in {} ({install})",
        playwright.display()
    );
    let playwright = std::fs::canonicalize(&playwright)
        .with_context(|| format!("resolving {}", playwright.display()))?;
    Ok((chromium, playwright))
}

fn pod(i: u64) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(i),
            "labels": {"app": "bench", "shard": format!("s{}", i % 16)},
        },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "busybox",
                "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }],
        },
    })
    .to_string()
}

fn pod_name(i: u64) -> String {
    format!("pod-{i:05}")
}

/// A node agent's kind of status write: the phase, an address, the Ready condition flipping,
/// with a message naming the change (`phase`, `sender`, `tick`) so that no two patches are the
/// same (a patch that changes nothing makes no watch event).
fn status_patch(phase: u32, sender: usize, tick: u64) -> String {
    let ready = if tick.is_multiple_of(2) {
        "True"
    } else {
        "False"
    };
    json!({"status": {
        "phase": "Running",
        "podIP": format!("10.244.{}.{}", (tick / 250) % 250, tick % 250 + 1),
        "conditions": [{
            "type": "Ready",
            "status": ready,
            "message": format!("probe {phase}-{sender}-{tick}"),
        }],
    }})
    .to_string()
}

async fn create_pods(client: &Client, pods: u64) -> Result<()> {
    let mut connection = client.connect(Protocol::Http1).await?;
    connection
        .call(Call::post_json(
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}).to_string(),
        ))
        .await?;
    let mut tasks = tokio::task::JoinSet::new();
    for (k, mut connection) in client
        .connect_many(Protocol::Http1, CREATORS)
        .await?
        .into_iter()
        .enumerate()
    {
        tasks.spawn(async move {
            let path = format!("/api/v1/namespaces/{NS}/pods");
            let mut i = k as u64;
            while i < pods {
                connection.call(Call::post_json(&path, pod(i))).await?;
                i += CREATORS as u64;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// Sends `rate` status patches per second, spread over the pods, for `duration`; returns how
/// many were made. Each `phase` makes patches of its own.
async fn churn(
    client: &Client,
    phase: u32,
    pods: u64,
    rate: u64,
    duration: Duration,
) -> Result<u64> {
    let made = Arc::new(AtomicU64::new(0));
    let per_connection = Duration::from_secs_f64(CHANGERS as f64 / rate.max(1) as f64);
    let end = Instant::now() + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for (k, mut connection) in client
        .connect_many(Protocol::Http1, CHANGERS)
        .await?
        .into_iter()
        .enumerate()
    {
        let made = made.clone();
        tasks.spawn(async move {
            let mut ticks = tokio::time::interval(per_connection);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut n = 0_u64;
            loop {
                ticks.tick().await;
                if Instant::now() >= end {
                    return anyhow::Ok(());
                }
                let i = (k as u64 + n * CHANGERS as u64) % pods;
                let path = format!("/api/v1/namespaces/{NS}/pods/{}/status", pod_name(i));
                connection
                    .call(Call::merge_patch(path, status_patch(phase, k, n)))
                    .await?;
                made.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(made.load(Ordering::Relaxed))
}

/// The browser side, running.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
}

impl Browser {
    /// Waits for the line starting with `prefix` (other lines are the script's log, printed);
    /// returns the rest of it.
    async fn expect(&mut self, prefix: &str) -> Result<String> {
        let read = async {
            while let Some(line) = self.stdout.next_line().await? {
                if let Some(rest) = line.strip_prefix(prefix) {
                    return Ok(rest.trim().to_owned());
                }
                eprintln!("bench.mjs: {line}");
            }
            bail!("bench.mjs ended before saying {prefix}")
        };
        tokio::time::timeout(BROWSER_WAIT, read)
            .await
            .with_context(|| format!("bench.mjs did not say {prefix} within {BROWSER_WAIT:?}"))?
    }

    async fn say(&mut self, line: &str) -> Result<()> {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Loaded {
    load_times: Vec<f64>,
    rows_in_dom: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Recorded {
    frames: Vec<f64>,
    long_tasks: Vec<f64>,
    probes: Vec<f64>,
    catch_up_ms: f64,
    count: String,
    watches_started: u64,
    events: u64,
    batches: u64,
    apply_ms: Vec<f64>,
}

fn ms(values: &[f64]) -> Vec<Duration> {
    values
        .iter()
        .map(|v| Duration::from_secs_f64(v.max(0.0) / 1000.0))
        .collect()
}

/// The server's CPU in a phase, as a share of one core.
fn cores(cpu: &CpuUse) -> f64 {
    cpu.server.as_secs_f64() / cpu.wall.as_secs_f64().max(f64::EPSILON)
}

/// The server's CPU seconds per change in a phase that made `made` changes.
fn per_change(cpu: &CpuUse, made: u64) -> f64 {
    cpu.server.as_secs_f64() / made.max(1) as f64
}

/// The server's CPU while nothing is sent for `window`.
async fn idle(server: &ServerProcess, window: Duration) -> Result<CpuUse> {
    let meter = Meter::start(server.pid())?;
    tokio::time::sleep(window).await;
    meter.stop()
}

/// The server's CPU per change with the page on the list against the same browser on a blank
/// page, in alternating pairs of short phases (the machine's other load drifts between the
/// phases of a pair less than between two long phases); the row with the median ratio.
async fn paired_cpu(
    server: &ServerProcess,
    client: &Client,
    browser: &mut Browser,
    args: &ConsoleBenchArgs,
) -> Result<Row> {
    let mut ratios = Vec::new();
    for pair in 0..args.pairs {
        let mut cost = [0.0_f64; 2];
        for (i, command) in ["blank", "list"].into_iter().enumerate() {
            browser.say(command).await?;
            browser.expect("OK").await?;
            let meter = Meter::start(server.pid())?;
            let phase = 10 + 2 * pair + i as u32;
            let made = churn(client, phase, args.pods, args.rate, PAIR_PHASE).await?;
            cost[i] = per_change(&meter.stop()?, made);
        }
        ratios.push(cost[1] / cost[0].max(f64::EPSILON));
    }
    ratios.sort_by(f64::total_cmp);
    let added = 100.0 * (ratios[ratios.len() / 2] - 1.0);
    Ok(Row::new(
        "server CPU per change, list open against blank page",
        format!(
            "median {added:+.1} % over {} pairs of {} s phases (each pair: {})",
            ratios.len(),
            PAIR_PHASE.as_secs(),
            ratios
                .iter()
                .map(|r| format!("{:+.0} %", 100.0 * (r - 1.0)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .target("≤ +5 %", added <= 5.0))
}

async fn measure(
    server: &ServerProcess,
    endpoint: Endpoint,
    args: &ConsoleBenchArgs,
    chromium: &Path,
    playwright: &Path,
    root: &Path,
) -> Result<Vec<Row>> {
    let client = Client::new(endpoint)?;
    let mut rows = Vec::new();
    let started = Instant::now();
    create_pods(&client, args.pods).await?;
    rows.push(Row::new(
        "setup",
        format!(
            "{} pods created in {:.1} s",
            count(args.pods),
            started.elapsed().as_secs_f64()
        ),
    ));

    let idle_alone = idle(server, args.window).await?;
    let meter = Meter::start(server.pid())?;
    let made = churn(&client, 1, args.pods, args.rate, args.window).await?;
    let churn_alone = meter.stop()?;

    let script = root.join("bench.mjs");
    std::fs::write(&script, SCRIPT).context("writing bench.mjs")?;
    let mut child = Command::new("node")
        .arg(&script)
        .env(
            "CONSOLE_URL",
            crate::console_url::login_url(&root.join("data"), None).await?,
        )
        .env("CHROMIUM", chromium)
        .env("PLAYWRIGHT_DIR", playwright)
        .env("PODS", args.pods.to_string())
        .env("LOADS", args.loads.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running node (the console benchmark needs it on the PATH)")?;
    let mut browser = Browser {
        stdin: child.stdin.take().context("node's stdin")?,
        stdout: BufReader::new(child.stdout.take().context("node's stdout")?).lines(),
        child,
    };

    let loaded: Loaded = serde_json::from_str(&browser.expect("LOADED").await?)?;
    let loads = summarize_samples(&ms(&loaded.load_times));
    rows.push(
        Row::new(
            format!("objects page, {} pods: load", count(args.pods)),
            format!(
                "{} loads, {} rows in the document",
                loads.count,
                count(loaded.rows_in_dom)
            ),
        )
        .latency(loads)
        .target("median ≤ 1 s", loads.p50 <= Duration::from_secs(1)),
    );

    let idle_open = idle(server, args.window).await?;
    // Its last phase leaves the page on the list, where the recording below needs it.
    rows.push(paired_cpu(server, &client, &mut browser, args).await?);

    browser.say("churn").await?;
    browser.expect("RECORDING").await?;
    let meter = Meter::start(server.pid())?;
    let made_open = churn(&client, 2, args.pods, args.rate, args.window).await?;
    let churn_open = meter.stop()?;
    browser.say(&format!("stop {made_open}")).await?;
    let recorded: Recorded = serde_json::from_str(&browser.expect("RESULT").await?)?;
    let _ = browser.child.wait().await;

    let window = args.window.as_secs_f64();
    rows.push(Row::new(
        "changes made",
        format!(
            "{:.0}/s without the browser, {:.0}/s with it (asked {}/s)",
            made as f64 / window,
            made_open as f64 / window,
            count(args.rate)
        ),
    ));
    let probes = summarize_samples(&ms(&recorded.probes));
    rows.push(
        Row::new(
            "main thread while pods change: probe round trip",
            format!("{} probes, one per 100 ms", probes.count),
        )
        .latency(probes)
        .target("p99 ≤ 100 ms", probes.p99 <= Duration::from_millis(100)),
    );
    let frames = summarize_samples(&ms(&recorded.frames));
    let long_total = recorded.long_tasks.iter().fold(0.0, |sum, t| sum + t);
    rows.push(
        Row::new(
            "frame gaps while pods change",
            format!(
                "{} frames; {} long tasks (> 50 ms), {:.0} ms in all",
                frames.count,
                recorded.long_tasks.len(),
                long_total
            ),
        )
        .latency(frames),
    );
    let apply = summarize_samples(&ms(&recorded.apply_ms));
    rows.push(
        Row::new(
            "watch events applied",
            format!(
                "{} events in {} batches ({:.0} per batch); all applied {} after the last change; \
                 count shown {}; watches started again: {}",
                count(recorded.events),
                count(recorded.batches),
                recorded.events as f64 / recorded.batches.max(1) as f64,
                millis(Duration::from_secs_f64(recorded.catch_up_ms / 1000.0)),
                recorded.count,
                recorded.watches_started,
            ),
        )
        .latency(apply),
    );

    let added_idle = cores(&idle_open) - cores(&idle_alone);
    rows.push(Row::new(
        "server CPU, idle",
        format!(
            "{:.3} cores without the browser, {:.3} with it open on the pods list: {:+.1} % of a core",
            cores(&idle_alone),
            cores(&idle_open),
            100.0 * added_idle
        ),
    ));
    // Per change: with Chromium on the same two cores the rate made may differ.
    let (alone, open) = (
        per_change(&churn_alone, made),
        per_change(&churn_open, made_open),
    );
    let relative = 100.0 * (open / alone.max(f64::EPSILON) - 1.0);
    rows.push(Row::new(
        "server CPU per change, one long phase each (no browser / list open)",
        format!(
            "{:.0} µs without the browser ({:.2} cores), {:.0} µs with it ({:.2} cores): \
             {relative:+.1} %",
            alone * 1e6,
            cores(&churn_alone),
            open * 1e6,
            cores(&churn_open),
        ),
    ));
    Ok(rows)
}
