//! Watch fan-out: 100 watchers on one prefix follow 16 concurrent writers of 1 KiB values.
//! Reports deliveries per second (events received by all watchers, over the time from the first
//! write to the last delivery) and the delay from a writer submitting a write to a watcher
//! receiving it, read from a timestamp the writer puts in the value's first 8 bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use setpoint_store::{EventKind, Revision, WatchBatch, WatchStream};
use tokio::sync::watch;

use super::load::{self, Budget, Sizes};
use crate::bench::latency::Latencies;
use crate::bench::report::{self, Row};
use crate::cli::StoreKind;

/// Concurrent watchers.
const WATCHERS: usize = 100;
/// Concurrent writers.
const WRITERS: usize = 16;
/// The prefix written and watched.
const PREFIX: &str = "/registry/configmaps/watch/";
/// Deliveries per second to reach.
const TARGET: u64 = 1_000_000;
/// How long watchers may lag behind the last write before the benchmark fails.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// What one watcher saw.
struct Followed {
    /// Submit-to-receive delay of every event.
    delays: Latencies,
    /// Events received.
    received: u64,
    /// When the last event arrived.
    last: Option<Instant>,
    /// The revision of the last event (events must come in increasing revision order).
    previous: Revision,
}

impl Followed {
    /// Records the events of a batch received `now` (nanoseconds since the base instant); fails
    /// on anything but creates in increasing revision order.
    fn record(&mut self, batch: &WatchBatch, now: u64) -> Result<()> {
        for event in &batch.events {
            let revision = event.revision();
            ensure!(
                event.kind == EventKind::Put,
                "a watch delivered a {:?} of {:?}",
                event.kind,
                event.kv.key
            );
            ensure!(
                revision > self.previous,
                "a watch delivered revision {revision} after {}",
                self.previous
            );
            self.previous = revision;
            let stamp: [u8; 8] = event
                .kv
                .value
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .context("a value too short for its timestamp")?;
            let sent = u64::from_le_bytes(stamp);
            self.delays
                .record(Duration::from_nanos(now.saturating_sub(sent)));
            self.received += 1;
        }
        if !batch.events.is_empty() {
            self.last = Some(Instant::now());
        }
        Ok(())
    }
}

/// Runs the watch benchmark in a fresh store under `root`.
pub(super) async fn bench_watch(root: &Path, sizes: Sizes, kind: StoreKind) -> Result<Vec<Row>> {
    let opened = load::open(&root.join("watch"), kind).await?;
    let store = opened.store.clone();
    let from = store.current_revision().await?;
    let base = Instant::now();
    let (total_tx, total_rx) = watch::channel(None);
    let mut watchers = Vec::with_capacity(WATCHERS);
    for _ in 0..WATCHERS {
        let stream = store
            .watch(Bytes::from_static(PREFIX.as_bytes()), from)
            .await?;
        watchers.push(tokio::spawn(follow(stream, base, total_rx.clone())));
    }

    eprintln!("[watch] {WATCHERS} watchers, {WRITERS} writers");
    let budget = Budget::new(sizes.watch_writes, sizes.watch_time);
    let template = load::value();
    let first_write = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (store, budget, template) = (store.clone(), budget.clone(), template.clone());
            tokio::spawn(async move {
                let mut written = 0u64;
                while budget.take().is_some() {
                    let mut value = BytesMut::from(&template[..]);
                    value[..8].copy_from_slice(&nanos_since(base).to_le_bytes());
                    let key = Bytes::from(format!("{PREFIX}w{w}-{written}"));
                    store.create(key, value.freeze()).await?;
                    written += 1;
                }
                anyhow::Ok(written)
            })
        })
        .collect();
    let mut written = 0;
    for writer in writers {
        written += writer.await?.context("writing for the watchers")?;
    }
    let write_elapsed = first_write.elapsed();
    total_tx.send_replace(Some(written));

    let mut delays = Latencies::new();
    let mut deliveries = 0;
    let mut last = first_write;
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, futures::future::join_all(watchers))
        .await
        .with_context(|| format!("watchers still behind {DRAIN_TIMEOUT:?} after the last write"))?;
    for followed in drained {
        let followed = followed?.context("following the writes")?;
        ensure!(
            followed.received == written,
            "a watcher received {} events for {written} writes",
            followed.received
        );
        delays.merge(&followed.delays);
        deliveries += followed.received;
        last = last.max(followed.last.unwrap_or(first_write));
    }
    load::close(opened).await?;

    let span = last - first_write;
    let row = Row::new(
        format!(
            "watch: {WATCHERS} watchers, {WRITERS} writers × 1 KiB (latency: submit → receive)"
        ),
        format!(
            "{} deliveries/s ({} events in {:.2} s; {} writes/s)",
            report::rate(deliveries, span),
            report::count(deliveries),
            span.as_secs_f64(),
            report::rate(written, write_elapsed)
        ),
    )
    .latency(delays.summary())
    .target(
        format!("≥ {} deliveries/s", report::count(TARGET)),
        report::per_second(deliveries, span) >= TARGET,
    );
    Ok(vec![row])
}

/// Consumes one watch until it has received as many events as `total` announces, recording
/// each event's delay; checks the events are creates in revision order.
async fn follow(
    mut stream: WatchStream,
    base: Instant,
    mut total: watch::Receiver<Option<u64>>,
) -> Result<Followed> {
    let mut followed = Followed {
        delays: Latencies::new(),
        received: 0,
        last: None,
        previous: Revision::ZERO,
    };
    loop {
        let target = *total.borrow_and_update();
        if target.is_some_and(|t| followed.received >= t) {
            return Ok(followed);
        }
        tokio::select! {
            batch = stream.next() => {
                let Some(batch) = batch else {
                    bail!("the watch ended after {} events", followed.received);
                };
                followed.record(&batch.context("the watch failed")?, nanos_since(base))?;
            }
            changed = total.changed() => changed.context("the benchmark stopped")?,
        }
    }
}

/// Nanoseconds from `base` to now.
fn nanos_since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
