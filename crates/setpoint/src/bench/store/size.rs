//! Data directory size under sustained updates: 10,000 keys of 1 KiB, then a long run of
//! conditional updates with the default retention and automatic compaction on. Reports the
//! size after the run, its peak during the run, and the size once compaction has had time to
//! catch up, against the 10 MiB of live data; and the write rate the run achieved.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use setpoint_store::{EmbeddedConfig, Revision, Store};

use super::load::{self, Budget, DirSize, Sizes, VALUE_BYTES};
use crate::bench::latency::Latencies;
use crate::bench::report::{self, Row};

/// Keys updated.
const KEYS: u64 = 10_000;
/// Concurrent writers; writer `w` updates the keys `i` with `i % WRITERS == w`.
const WRITERS: u64 = 64;
/// The key prefix.
const PREFIX: &str = "/registry/configmaps/size/";
/// How often the size is sampled during the run.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);
/// How long to let compaction catch up after the run before the last measurement.
const SETTLE: Duration = Duration::from_secs(3);

/// Runs the file-size benchmark in a fresh embedded store under `root`.
pub(super) async fn bench_size(root: &Path, sizes: Sizes) -> Result<Vec<Row>> {
    let dir = root.join("size");
    let store = load::open_embedded(&dir).await?;
    eprintln!("[size] writing {} keys", report::count(KEYS));
    let shared: load::BenchStore = std::sync::Arc::new(store.clone());
    let revisions = load::populate(&shared, PREFIX, KEYS, 64).await?;
    drop(shared);

    eprintln!("[size] {} updates", report::count(sizes.size_updates));
    let sampler = Sampler::start(dir.clone());
    let budget = Budget::new(sizes.size_updates, sizes.size_time);
    let value = load::value();
    let start = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut own: Vec<(u64, Revision)> = (w..KEYS)
                .step_by(WRITERS as usize)
                .map(|i| (i, revisions[i as usize]))
                .collect();
            let (store, budget, value) = (store.clone(), budget.clone(), value.clone());
            tokio::spawn(async move {
                let mut latencies = Latencies::new();
                let mut next = 0;
                while budget.take().is_some() {
                    let slot = next % own.len();
                    let (i, revision) = &mut own[slot];
                    let began = Instant::now();
                    let kv = store
                        .update(load::object_key(PREFIX, *i), value.clone(), Some(*revision))
                        .await?;
                    latencies.record(began.elapsed());
                    *revision = kv.mod_revision;
                    next += 1;
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Latencies::new();
    for writer in writers {
        latencies.merge(&writer.await?.context("updating")?);
    }
    let elapsed = start.elapsed();
    let after_run = measure(&dir).await?;
    eprintln!("[size] letting compaction settle for {SETTLE:?}");
    tokio::time::sleep(SETTLE).await;
    let settled = measure(&dir).await?;
    let peak = sampler
        .stop()
        .await?
        .max(after_run.apparent)
        .max(settled.apparent);
    let (current, compacted) = (store.current_revision().await?, store.compacted_revision());
    load::close_embedded(store).await?;
    let closed = measure(&dir).await?;

    let latency = latencies.summary();
    let live = KEYS * VALUE_BYTES as u64;
    Ok(vec![
        Row::new(
            format!(
                "size run: {} updates to {} keys × 1 KiB, {WRITERS} writers",
                report::count(latency.count),
                report::count(KEYS)
            ),
            format!(
                "{} writes/s ({} in {:.1} s)",
                report::rate(latency.count, elapsed),
                report::count(latency.count),
                elapsed.as_secs_f64()
            ),
        )
        .latency(latency),
        Row::new(
            "size run: data dir at the end",
            format!(
                "{} (live data {}; revision {}, compacted to {}; retention {} revisions)",
                report::mib(after_run.apparent),
                report::mib(live),
                report::count(current.get()),
                report::count(compacted.get()),
                report::count(EmbeddedConfig::on_disk(&dir).history_revisions)
            ),
        ),
        Row::new("size run: data dir peak", report::mib(peak)),
        Row::new(
            format!("size run: data dir {} s later", SETTLE.as_secs()),
            report::mib(settled.apparent),
        ),
        Row::new(
            "size run: data dir after close",
            format!(
                "{} (allocated {})",
                report::mib(closed.apparent),
                report::mib(closed.allocated)
            ),
        ),
    ])
}

/// Measures `dir` off the async threads.
async fn measure(dir: &Path) -> Result<DirSize> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || load::dir_size(&dir)).await?
}

/// A background task that samples a directory's size and keeps the largest. Sampling stops
/// when the sampler is stopped or dropped.
struct Sampler {
    /// Set to stop the sampling.
    stop: Arc<AtomicBool>,
    /// The task, answering the peak apparent size; taken by [`Sampler::stop`].
    task: Option<tokio::task::JoinHandle<Result<u64>>>,
}

impl Sampler {
    /// Starts sampling `dir` every [`SAMPLE_EVERY`].
    fn start(dir: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut peak = 0;
            while !stopped.load(Ordering::Relaxed) {
                peak = peak.max(measure(&dir).await?.apparent);
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            Ok(peak)
        });
        Sampler {
            stop,
            task: Some(task),
        }
    }

    /// Stops sampling; returns the peak apparent size seen.
    async fn stop(mut self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        match self.task.take() {
            Some(task) => task.await?,
            None => Ok(0),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
