//! Watch fan-out: [`WATCHERS`] watches of one namespace's ConfigMaps (`?watch=1&resourceVersion=
//! <rv>`, see [`super::watcher`]), in two runs.
//!
//! - Live: the watchers follow concurrent writers (32, as many as the creates benchmark's clients, unless `--watch-writers` says otherwise) that alternately create new 1 KiB
//!   ConfigMaps and merge-patch existing ones, each write stamped with its send time. Reports
//!   deliveries per second (events received by all watchers, over the time from the first
//!   write to the last delivery) and the delay from sending a write to a watcher decoding it.
//!   Deliveries are bounded by the write rate here: each write is delivered [`WATCHERS`] times.
//! - Replay: the writes come first, then the watchers start from the revision before them and
//!   catch up from the server's window of recent events. This is fan-out alone: deliveries per
//!   second from opening the watches to the last delivery.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde::Deserialize;

use super::client::{Call, Connection, Protocol};
use super::load::{self, Budget, MakeCall, Ran};
use super::watcher::{nanos_since, Watchers};
use super::Harness;
use crate::bench::report::{self, millis, Row};
use crate::bench::usage::Meter;

/// Concurrent watchers.
const WATCHERS: usize = 100;
/// The namespace written and watched.
const NAMESPACE: &str = "bench-watch";
/// ConfigMaps created before the watches start, for the writers to patch.
const SEEDS: u64 = 256;
/// Deliveries per second to reach.
const TARGET: u64 = 500_000;
/// How long watchers may lag behind the last write before the benchmark fails.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the watch benchmark: setup, the live run, the replay.
pub(super) async fn bench_watch(harness: &mut Harness) -> Result<Vec<Row>> {
    let path = load::configmaps(NAMESPACE);
    let mut connection = harness.client.connect(Protocol::Http1).await?;
    load::create_namespace(&mut connection, NAMESPACE).await?;
    load::populate(
        &harness.client,
        NAMESPACE,
        "seed",
        SEEDS,
        harness.sizes.watch_time,
    )
    .await
    .context("creating the ConfigMaps to patch")?;
    harness.objects += SEEDS;
    let mut rows = live(harness, &mut connection, &path).await?;
    rows.extend(replay(harness, &mut connection, &path).await?);
    Ok(rows)
}

/// The live run: watchers open, then writers write.
async fn live(harness: &mut Harness, connection: &mut Connection, path: &str) -> Result<Vec<Row>> {
    let sizes = harness.sizes;
    let rv = current_revision(connection, path).await?;
    let writers = harness.watch_writers;
    eprintln!("[watch] {WATCHERS} watchers from resourceVersion {rv}, {writers} writers");
    let base = Instant::now();
    let watchers = Watchers::open(&harness.client, path, rv, WATCHERS, base).await?;
    let meter = Meter::start(harness.server.pid())?;
    let first_write = Instant::now();
    let wrote = write(
        harness,
        path,
        "w",
        sizes.watch_writes,
        sizes.watch_time,
        base,
    )
    .await?;
    let delivered = watchers.drain(wrote.ops, DRAIN_TIMEOUT).await?;
    let cpu = meter.stop()?;

    let span = delivered.last.unwrap_or(first_write) - first_write;
    let writes = wrote.latencies.summary();
    let label = format!("watch, live: {WATCHERS} watchers (HTTP/1.1), {writers} writers");
    Ok(vec![
        Row::new(
            format!("{label}, creates + merge patches of 1 KiB ConfigMaps (latency: send → decoded by a watcher)"),
            format!(
                "{} deliveries/s ({} events in {:.2} s); {} writes/s (write p50 {}, p99 {})",
                report::rate(delivered.deliveries, span),
                report::count(delivered.deliveries),
                span.as_secs_f64(),
                report::rate(wrote.ops, wrote.elapsed),
                millis(writes.p50),
                millis(writes.p99),
            ),
        )
        .latency(delivered.delays.summary())
        .target(
            format!("≥ {} deliveries/s", report::count(TARGET)),
            report::per_second(delivered.deliveries, span) >= TARGET,
        ),
        cpu.row(&label, delivered.deliveries, "delivery"),
    ])
}

/// The replay: writers write, then watchers open from before the writes and catch up.
async fn replay(
    harness: &mut Harness,
    connection: &mut Connection,
    path: &str,
) -> Result<Vec<Row>> {
    let sizes = harness.sizes;
    let rv = current_revision(connection, path).await?;
    eprintln!(
        "[watch] {} writes, then {WATCHERS} watchers from resourceVersion {rv}",
        sizes.replay_writes
    );
    let base = Instant::now();
    let wrote = write(
        harness,
        path,
        "r",
        sizes.replay_writes,
        sizes.watch_time,
        base,
    )
    .await?;
    let meter = Meter::start(harness.server.pid())?;
    let start = Instant::now();
    let watchers = Watchers::open(&harness.client, path, rv, WATCHERS, base).await?;
    let delivered = watchers.drain(wrote.ops, DRAIN_TIMEOUT).await?;
    let cpu = meter.stop()?;

    let span = delivered.last.unwrap_or(start) - start;
    let label = format!(
        "watch, replay: {WATCHERS} watchers (HTTP/1.1) catch up on {} events",
        report::count(wrote.ops)
    );
    Ok(vec![
        Row::new(
            format!("{label} (from opening the watches to the last event)"),
            format!(
                "{} deliveries/s ({} events in {:.2} s)",
                report::rate(delivered.deliveries, span),
                report::count(delivered.deliveries),
                span.as_secs_f64()
            ),
        )
        .target(
            format!("≥ {} deliveries/s", report::count(TARGET)),
            report::per_second(delivered.deliveries, span) >= TARGET,
        ),
        cpu.row(&label, delivered.deliveries, "delivery"),
    ])
}

/// Runs up to `writes` writes into `path` with the harness's `watch_writers` writers: even operations create
/// `{prefix}-<i>`, odd ones merge-patch one of the seeds; each carries its send time in
/// `data.sent`, in nanoseconds since `base`.
async fn write(
    harness: &mut Harness,
    path: &str,
    prefix: &'static str,
    writes: u64,
    time: Duration,
    base: Instant,
) -> Result<Ran> {
    let writers = load::clients(&harness.client, Protocol::Http1, harness.watch_writers).await?;
    let path = path.to_owned();
    let make: MakeCall = Arc::new(move |i| {
        let sent = nanos_since(base);
        if i % 2 == 0 {
            Call::post_json(path.clone(), load::configmap(&load::name(prefix, i), sent))
        } else {
            let seed = load::name("seed", (i / 2) % SEEDS);
            let patch = format!(r#"{{"data":{{"sent":"{sent}"}}}}"#);
            Call::merge_patch(format!("{path}/{seed}"), patch)
        }
    });
    let wrote = load::run(writers, Budget::new(writes, time), make)
        .await
        .context("writing for the watchers")?;
    harness.objects += wrote.ops.div_ceil(2);
    Ok(wrote)
}

/// The resource version of a list of `path` now.
async fn current_revision(connection: &mut Connection, path: &str) -> Result<u64> {
    let list = connection
        .call(Call::get(format!("{path}?limit=1")))
        .await?;
    list_revision(&list)
}

/// The `metadata.resourceVersion` of a list answer.
fn list_revision(body: &[u8]) -> Result<u64> {
    #[derive(Deserialize)]
    struct List {
        metadata: Meta,
    }
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: String,
    }
    let list: List = serde_json::from_slice(body).context("the list answer does not decode")?;
    list.metadata
        .resource_version
        .parse()
        .context("the list's resourceVersion is not a number")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_revision_should_be_read_from_the_list_metadata() {
        let body = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"42"},"items":[]}"#;
        assert_eq!(list_revision(body).expect("parses"), 42);
    }
}
