//! Durable write throughput and latency: creates, then conditional updates (as Kubernetes
//! writes, `expected` = the key's mod revision) on the keys each writer created, at 1, 16 and 64
//! concurrent writers, each on a fresh store.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use setpoint_store::Revision;

use super::load::BenchStore;
use super::load::{self, Budget, Sizes};
use crate::bench::latency::{Latencies, Summary};
use crate::bench::report::{self, Row};
use crate::cli::StoreKind;

/// The concurrency levels measured.
const CONCURRENCY: [usize; 3] = [1, 16, 64];

/// The target at the highest concurrency: writes per second, and p99 latency.
const TARGET_RATE: u64 = 30_000;
/// See [`TARGET_RATE`].
const TARGET_P99: Duration = Duration::from_millis(5);

/// What one load run achieved.
struct Run {
    /// Operations completed.
    ops: u64,
    /// From the first operation's start to the last one's end.
    elapsed: Duration,
    /// Per-operation latencies.
    latency: Summary,
}

/// What one writer leaves behind: its latencies and its keys with their mod revisions.
type WriterResult = (Latencies, Vec<(Bytes, Revision)>);

/// Runs the write benchmarks in fresh stores under `root`.
pub(super) async fn bench_writes(root: &Path, sizes: Sizes, kind: StoreKind) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for writers in CONCURRENCY {
        let dir = root.join(format!("writes-{writers}"));
        let opened = load::open(&dir, kind).await?;
        let store = opened.store.clone();
        eprintln!("[writes] creates, {writers} writers");
        let (creates, keys) = creates(&store, writers, sizes).await?;
        eprintln!("[writes] conditional updates, {writers} writers");
        let updates = updates(&store, keys, sizes).await?;
        load::close(opened).await?;
        for (op, run) in [("create", creates), ("update (conditional)", updates)] {
            rows.push(row(op, writers, &run));
        }
    }
    Ok(rows)
}

/// The result row of one run; the highest concurrency carries the target.
fn row(op: &str, writers: usize, run: &Run) -> Row {
    let plural = if writers == 1 { "" } else { "s" };
    let row = Row::new(
        format!("durable {op}, {writers} writer{plural}, 1 KiB"),
        format!(
            "{} writes/s ({} in {:.2} s)",
            report::rate(run.ops, run.elapsed),
            report::count(run.ops),
            run.elapsed.as_secs_f64()
        ),
    )
    .latency(run.latency);
    if writers == CONCURRENCY[CONCURRENCY.len() - 1] {
        let met = report::per_second(run.ops, run.elapsed) >= TARGET_RATE
            && run.latency.p99 <= TARGET_P99;
        row.target(
            format!(
                "≥ {}/s, p99 ≤ {}",
                report::count(TARGET_RATE),
                report::millis(TARGET_P99)
            ),
            met,
        )
    } else {
        row
    }
}

/// Creates new keys `/registry/configmaps/bench/w{writer}-{i}` until the budget runs out.
/// Returns the run and each writer's keys.
async fn creates(
    store: &BenchStore,
    writers: usize,
    sizes: Sizes,
) -> Result<(Run, Vec<Vec<(Bytes, Revision)>>)> {
    let budget = Budget::new(sizes.write_ops, sizes.write_time);
    let value = load::value();
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (store, budget, value) = (store.clone(), budget.clone(), value.clone());
            tokio::spawn(async move {
                let mut latencies = Latencies::new();
                let mut keys = Vec::new();
                while budget.take().is_some() {
                    let key =
                        Bytes::from(format!("/registry/configmaps/bench/w{w}-{}", keys.len()));
                    let began = Instant::now();
                    let kv = store.create(key.clone(), value.clone()).await?;
                    latencies.record(began.elapsed());
                    keys.push((key, kv.mod_revision));
                }
                anyhow::Ok((latencies, keys))
            })
        })
        .collect();
    let (run, keys) = join(tasks, start).await.context("durable creates")?;
    Ok((run, keys))
}

/// Updates each writer's keys in turn, each conditional on the mod revision the writer last
/// saw, until the budget runs out. A writer that created no key creates one first, untimed.
async fn updates(
    store: &BenchStore,
    keys: Vec<Vec<(Bytes, Revision)>>,
    sizes: Sizes,
) -> Result<Run> {
    let value = load::value();
    let mut ready = Vec::with_capacity(keys.len());
    for (w, mut own) in keys.into_iter().enumerate() {
        if own.is_empty() {
            let key = Bytes::from(format!("/registry/configmaps/bench/w{w}-0"));
            let kv = store.create(key.clone(), value.clone()).await?;
            own.push((key, kv.mod_revision));
        }
        ready.push(own);
    }
    let budget = Budget::new(sizes.write_ops, sizes.write_time);
    let start = Instant::now();
    let tasks: Vec<_> = ready
        .into_iter()
        .map(|mut own| {
            let (store, budget, value) = (store.clone(), budget.clone(), value.clone());
            tokio::spawn(async move {
                let mut latencies = Latencies::new();
                let mut next = 0;
                while budget.take().is_some() {
                    let slot = next % own.len();
                    let (key, revision) = &mut own[slot];
                    let began = Instant::now();
                    let kv = store
                        .update(key.clone(), value.clone(), Some(*revision))
                        .await?;
                    latencies.record(began.elapsed());
                    *revision = kv.mod_revision;
                    next += 1;
                }
                anyhow::Ok((latencies, own))
            })
        })
        .collect();
    let (run, _) = join(tasks, start)
        .await
        .context("durable conditional updates")?;
    Ok(run)
}

/// Waits for every writer and merges their results into one run that began at `start`.
async fn join(
    tasks: Vec<tokio::task::JoinHandle<Result<WriterResult>>>,
    start: Instant,
) -> Result<(Run, Vec<Vec<(Bytes, Revision)>>)> {
    let mut latencies = Latencies::new();
    let mut keys = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (writer_latencies, writer_keys) = task.await??;
        latencies.merge(&writer_latencies);
        keys.push(writer_keys);
    }
    let elapsed = start.elapsed();
    let latency = latencies.summary();
    Ok((
        Run {
            ops: latency.count,
            elapsed,
            latency,
        },
        keys,
    ))
}
