//! The watchers of the watch benchmark: many watches of one collection, each on its own
//! HTTP/1.1 connection and in its own task, each splitting its stream into event lines and
//! decoding every one like a client would. A watcher checks that it gets only `ADDED` and
//! `MODIFIED` events in increasing resource-version order and records, for each, the delay
//! since the send time the writer put in the object's `data.sent`.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use bytes::BytesMut;
use http::StatusCode;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::client::{Call, Client, Protocol};
use crate::bench::latency::Latencies;

/// How long a watch may take to answer with its headers.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The parts of a watch event the watchers read.
#[derive(Deserialize)]
struct Event<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    kind: &'a str,
    /// The object.
    #[serde(borrow)]
    object: EventObject<'a>,
}

/// The object of a watch event.
#[derive(Deserialize)]
struct EventObject<'a> {
    /// Its metadata (absent from the `Status` of an `ERROR`).
    #[serde(borrow, default)]
    metadata: Option<EventMeta<'a>>,
    /// Its data (a ConfigMap's).
    #[serde(borrow, default)]
    data: Option<EventData<'a>>,
}

/// The metadata of an event's object.
#[derive(Deserialize)]
struct EventMeta<'a> {
    /// The revision of the change.
    #[serde(rename = "resourceVersion")]
    resource_version: &'a str,
}

/// The data of an event's ConfigMap.
#[derive(Deserialize)]
struct EventData<'a> {
    /// When the write was sent, in nanoseconds since the benchmark's base instant.
    sent: Option<&'a str>,
}

/// What the watchers received, together.
pub(super) struct Delivered {
    /// Send-to-receive delay of every event delivered.
    pub(super) delays: Latencies,
    /// Events received by all watchers.
    pub(super) deliveries: u64,
    /// When the last event arrived (`None` if none did).
    pub(super) last: Option<Instant>,
}

/// Running watchers, each in its own task; dropping them aborts the tasks.
pub(super) struct Watchers {
    /// One task per watcher.
    tasks: JoinSet<Result<Followed>>,
    /// How many events each watcher is to receive before it stops; `None` until known.
    total: watch::Sender<Option<u64>>,
}

impl Watchers {
    /// Starts `n` watches of `path` from resource version `rv`: opens every connection first,
    /// then sends all the watch requests at once and waits for each answer's headers (so the
    /// watches are registered when this returns). `base` is the instant `data.sent` stamps
    /// count from.
    pub(super) async fn open(
        client: &Client,
        path: &str,
        rv: u64,
        n: usize,
        base: Instant,
    ) -> Result<Self> {
        let mut connections = client.connect_many(Protocol::Http1, n).await?;
        let uri = format!("{path}?watch=1&resourceVersion={rv}");
        let responses = connections
            .iter_mut()
            .map(|connection| connection.open(Call::get(uri.clone())));
        let responses = tokio::time::timeout(OPEN_TIMEOUT, futures::future::join_all(responses))
            .await
            .with_context(|| format!("the watches did not answer within {OPEN_TIMEOUT:?}"))?;
        let (total, total_rx) = watch::channel(None);
        let mut tasks = JoinSet::new();
        for (connection, response) in connections.into_iter().zip(responses) {
            let response = response?;
            ensure!(
                response.status() == StatusCode::OK,
                "a watch answered {}",
                response.status()
            );
            let total = total_rx.clone();
            tasks.spawn(async move {
                let followed = follow(response.into_body(), base, total).await;
                drop(connection);
                followed
            });
        }
        Ok(Watchers { tasks, total })
    }

    /// Tells every watcher to expect `events` events in all and waits, at most `timeout`, until
    /// each has received them; fails if one received more, failed or ended.
    pub(super) async fn drain(mut self, events: u64, timeout: Duration) -> Result<Delivered> {
        self.total.send_replace(Some(events));
        let mut delivered = Delivered {
            delays: Latencies::new(),
            deliveries: 0,
            last: None,
        };
        let all = async {
            while let Some(done) = self.tasks.join_next().await {
                let followed = done.context("a watcher panicked")??;
                ensure!(
                    followed.received == events,
                    "a watcher received {} events of {events}",
                    followed.received
                );
                delivered.delays.merge(&followed.delays);
                delivered.deliveries += followed.received;
                delivered.last = delivered.last.max(followed.last);
            }
            anyhow::Ok(())
        };
        tokio::time::timeout(timeout, all)
            .await
            .with_context(|| format!("watchers still behind after {timeout:?}"))??;
        Ok(delivered)
    }
}

/// What one watcher saw.
struct Followed {
    /// Send-to-receive delay of every event.
    delays: Latencies,
    /// Events received.
    received: u64,
    /// When the last event arrived.
    last: Option<Instant>,
    /// The resource version of the last event (they must increase).
    previous: u64,
}

impl Followed {
    /// Nothing seen yet.
    fn new() -> Self {
        Followed {
            delays: Latencies::new(),
            received: 0,
            last: None,
            previous: 0,
        }
    }

    /// Records one event line received at `now` (nanoseconds since the base instant); fails on
    /// anything but an `ADDED` or `MODIFIED` in increasing resource-version order.
    fn record(&mut self, line: &[u8], now: u64) -> Result<()> {
        let event: Event<'_> = serde_json::from_slice(line).with_context(|| {
            format!(
                "a watch event does not decode: {}",
                String::from_utf8_lossy(line)
            )
        })?;
        ensure!(
            matches!(event.kind, "ADDED" | "MODIFIED"),
            "a watch delivered {}",
            String::from_utf8_lossy(line)
        );
        let revision: u64 = event
            .object
            .metadata
            .context("an event without metadata")?
            .resource_version
            .parse()
            .context("a resourceVersion that is not a number")?;
        ensure!(
            revision > self.previous,
            "a watch delivered revision {revision} after {}",
            self.previous
        );
        self.previous = revision;
        let sent: u64 = event
            .object
            .data
            .and_then(|d| d.sent)
            .context("an event without data.sent")?
            .parse()
            .context("a data.sent that is not a number")?;
        self.delays
            .record(Duration::from_nanos(now.saturating_sub(sent)));
        self.received += 1;
        Ok(())
    }
}

/// Reads a watch's body until it has received as many events as `total` announces, recording
/// each event's delay.
async fn follow(
    mut body: Incoming,
    base: Instant,
    mut total: watch::Receiver<Option<u64>>,
) -> Result<Followed> {
    let mut followed = Followed::new();
    let mut buffer = BytesMut::new();
    loop {
        let target = *total.borrow_and_update();
        if let Some(target) = target {
            ensure!(
                followed.received <= target,
                "a watcher received {} events of {target}",
                followed.received
            );
            if followed.received == target {
                return Ok(followed);
            }
        }
        tokio::select! {
            frame = body.frame() => {
                let Some(frame) = frame else {
                    bail!("the watch ended after {} events", followed.received);
                };
                let Ok(data) = frame.context("reading the watch")?.into_data() else {
                    continue;
                };
                let now = nanos_since(base);
                let before = followed.received;
                for_each_line(&mut buffer, &data, |line| followed.record(line, now))?;
                if followed.received > before {
                    followed.last = Some(Instant::now());
                }
            }
            changed = total.changed() => changed.context("the benchmark stopped")?,
        }
    }
}

/// Calls `f` with every complete line (without its `\n`) of the stream whose next chunk is
/// `data`; `partial` carries a line split across chunks. Whole lines are taken straight from
/// `data`, so only a split line is copied.
fn for_each_line(
    partial: &mut BytesMut,
    data: &[u8],
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut rest = data;
    if !partial.is_empty() {
        let Some(end) = memchr::memchr(b'\n', rest) else {
            partial.extend_from_slice(rest);
            return Ok(());
        };
        partial.extend_from_slice(&rest[..end]);
        f(partial)?;
        partial.clear();
        rest = &rest[end + 1..];
    }
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', rest) {
        f(&rest[start..end])?;
        start = end + 1;
    }
    partial.extend_from_slice(&rest[start..]);
    Ok(())
}

/// Nanoseconds from `base` to now.
pub(super) fn nanos_since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_should_be_joined() {
        let mut partial = BytesMut::new();
        let mut lines = Vec::new();
        for chunk in [&b"ab\ncd"[..], b"e", b"f\ng\n\nh", b"\n"] {
            for_each_line(&mut partial, chunk, |l| {
                lines.push(String::from_utf8(l.to_vec()).unwrap());
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(lines, ["ab", "cdef", "g", "", "h"]);
        assert!(partial.is_empty());
    }

    #[test]
    fn record_should_measure_the_delay_from_the_sent_stamp() {
        let mut f = Followed::new();
        let line = br#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"7","name":"a"},"data":{"payload":"x","sent":"1000"}}}"#;
        f.record(line, 3_001_000).expect("records");
        assert_eq!(f.received, 1);
        let max = f.delays.summary().max;
        assert!(
            max.abs_diff(Duration::from_millis(3)) < Duration::from_micros(10),
            "{max:?}"
        );
    }

    #[test]
    fn record_should_refuse_errors_and_revisions_out_of_order() {
        let mut f = Followed::new();
        let modified = br#"{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"9"},"data":{"sent":"1"}}}"#;
        f.record(modified, 2).expect("records");
        assert!(f.record(modified, 2).is_err(), "the same revision twice");
        let error = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
        assert!(f.record(error, 2).is_err());
    }
}
