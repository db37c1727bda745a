//! List latency: a consistent list of 10,000 keys of 1 KiB, at the current revision and at an
//! older one that 1,000 later updates have since changed (so the store must read history).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use setpoint_store::{ListRequest, Revision};

use super::load::BenchStore;
use super::load::{self, Sizes};
use crate::bench::latency::{self, Summary};
use crate::bench::report::{self, Row};
use crate::cli::StoreKind;

/// Keys listed.
const KEYS: u64 = 10_000;
/// Keys updated after the older revision.
const UPDATED: u64 = 1_000;
/// The key prefix listed.
const PREFIX: &str = "/registry/configmaps/list/";
/// The target for the median list.
const TARGET: Duration = Duration::from_millis(10);

/// Runs the list benchmarks in a fresh store under `root`.
pub(super) async fn bench_list(root: &Path, sizes: Sizes, kind: StoreKind) -> Result<Vec<Row>> {
    let opened = load::open(&root.join("list"), kind).await?;
    let store = opened.store.clone();
    eprintln!(
        "[list] writing {} keys, then updating {}",
        report::count(KEYS),
        report::count(UPDATED)
    );
    let mut revisions = load::populate(&store, PREFIX, KEYS, 64).await?;
    let older = store.current_revision().await?;
    update_every_tenth(&store, &mut revisions).await?;

    eprintln!("[list] listing at the current revision");
    let current = time_lists(&store, ListRequest::prefix(PREFIX), sizes.list_repetitions).await?;
    eprintln!("[list] listing at revision {older}");
    let past = time_lists(
        &store,
        ListRequest::prefix(PREFIX).at(older),
        sizes.list_repetitions,
    )
    .await?;
    load::close(opened).await?;

    let row = |name: String, summary: Summary| {
        Row::new(name, format!("median {}", report::millis(summary.p50)))
            .latency(summary)
            .target(
                format!("≤ {} (median)", report::millis(TARGET)),
                summary.p50 <= TARGET,
            )
    };
    let keys = report::count(KEYS);
    Ok(vec![
        row(
            format!("list {keys} keys × 1 KiB, current revision"),
            current,
        ),
        row(
            format!(
                "list {keys} keys × 1 KiB, older revision ({} updated since)",
                report::count(UPDATED)
            ),
            past,
        ),
    ])
}

/// Updates the objects 0, 10, 20, … (conditionally, concurrently), recording their new
/// revisions.
async fn update_every_tenth(store: &BenchStore, revisions: &mut [Revision]) -> Result<()> {
    let value = load::value();
    let step = usize::try_from(KEYS / UPDATED)?;
    let tasks: Vec<_> = (0..revisions.len())
        .step_by(step)
        .map(|i| {
            let (store, value, expected) = (store.clone(), value.clone(), revisions[i]);
            tokio::spawn(async move {
                let kv = store
                    .update(load::object_key(PREFIX, i as u64), value, Some(expected))
                    .await?;
                anyhow::Ok((i, kv.mod_revision))
            })
        })
        .collect();
    for task in tasks {
        let (i, revision) = task.await?.context("updating the listed keys")?;
        revisions[i] = revision;
    }
    Ok(())
}

/// Lists `request` once to warm up, then `repetitions` times timed; checks every list returns
/// all the keys.
async fn time_lists(
    store: &BenchStore,
    request: ListRequest,
    repetitions: usize,
) -> Result<Summary> {
    let mut samples = Vec::with_capacity(repetitions);
    for repetition in 0..=repetitions {
        let began = Instant::now();
        let result = store.list(request.clone()).await.context("listing")?;
        let took = began.elapsed();
        ensure!(
            result.kvs.len() as u64 == KEYS && !result.more(),
            "a list at {:?} returned {} keys ({} remaining), expected {KEYS}",
            request.revision,
            result.kvs.len(),
            result.remaining
        );
        if let Some(revision) = request.revision {
            ensure!(
                result.revision == revision,
                "a list at {revision} answered at {}",
                result.revision
            );
        }
        ensure!(
            result
                .kvs
                .iter()
                .all(|kv| kv.mod_revision <= result.revision),
            "a list at {} returned a key modified after it",
            result.revision
        );
        if repetition > 0 {
            samples.push(took);
        }
    }
    Ok(latency::summarize_samples(&samples))
}
