//! Lists: a namespace of [`Sizes::list_objects`](super::load::Sizes) 1 KiB ConfigMaps, listed
//! whole with one `GET …/configmaps` (no limit) and in pages of [`PAGE`] following the continue
//! tokens, on one keep-alive HTTP/1.1 connection. Each timed list runs from sending the first
//! request to the end of the last answer; a paged list includes reading each page's continue
//! token, as a client must. One untimed list warms up first.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _, Result};
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::client::{Call, Connection, Protocol};
use super::load;
use super::Harness;
use crate::bench::latency::summarize_samples;
use crate::bench::report::{self, Row};
use crate::bench::usage::Meter;

/// The namespace listed.
const NAMESPACE: &str = "bench-list";
/// Page size of the paged lists.
pub(in crate::bench) const PAGE: u64 = 500;
/// The median whole list should take at most this long.
const TARGET: Duration = Duration::from_millis(20);

/// The parts of a list answer the benchmark reads.
#[derive(Deserialize)]
pub(in crate::bench) struct ListPage {
    /// The objects, skipped over.
    pub(in crate::bench) items: Vec<IgnoredAny>,
    /// The list's metadata.
    pub(in crate::bench) metadata: ListMeta,
}

/// A list's metadata.
#[derive(Deserialize)]
pub(in crate::bench) struct ListMeta {
    /// The token for the next page, absent or empty on the last one.
    #[serde(rename = "continue", default)]
    pub(in crate::bench) continue_token: Option<String>,
}

/// Runs the list benchmark.
pub(super) async fn bench_list(harness: &mut Harness) -> Result<Vec<Row>> {
    let sizes = harness.sizes;
    let objects = sizes.list_objects;
    let mut connection = harness.client.connect(Protocol::Http1).await?;
    load::create_namespace(&mut connection, NAMESPACE).await?;
    eprintln!("[list] creating {objects} ConfigMaps in {NAMESPACE}");
    let populated = load::populate(&harness.client, NAMESPACE, "cm", objects, sizes.run_time)
        .await
        .context("creating the ConfigMaps to list")?;
    harness.objects += objects;
    let mut rows = vec![Row::new(
        format!(
            "list setup: creates into {NAMESPACE}, {}",
            load::clients_label(Protocol::Http1)
        ),
        format!(
            "{} creates/s ({} in {:.2} s)",
            report::rate(populated.ops, populated.elapsed),
            report::count(populated.ops),
            populated.elapsed.as_secs_f64()
        ),
    )
    .latency(populated.latencies.summary())];

    eprintln!("[list] {} whole lists", sizes.list_runs);
    let whole = load::configmaps(NAMESPACE);
    let body = list_whole(&mut connection, &whole).await?;
    let items = parse(&body)?.items.len() as u64;
    ensure!(items == objects, "listed {items} of {objects} ConfigMaps");
    let meter = Meter::start(harness.server.pid())?;
    let mut samples = Vec::with_capacity(sizes.list_runs);
    for _ in 0..sizes.list_runs {
        let start = Instant::now();
        list_whole(&mut connection, &whole).await?;
        samples.push(start.elapsed());
    }
    let cpu = meter.stop()?;
    let summary = summarize_samples(&samples);
    let label = format!("list: {} ConfigMaps, whole", report::count(objects));
    rows.push(
        Row::new(
            label.clone(),
            format!(
                "{} per list (median of {}), {} per answer",
                report::millis(summary.p50),
                summary.count,
                report::mib(body.len() as u64)
            ),
        )
        .latency(summary)
        .target(
            format!("median ≤ {}", report::millis(TARGET)),
            summary.p50 <= TARGET,
        ),
    );
    rows.push(cpu.row(&label, samples.len() as u64, "list"));

    eprintln!("[list] {} paged lists", sizes.page_runs);
    let meter = Meter::start(harness.server.pid())?;
    let mut samples = Vec::with_capacity(sizes.page_runs);
    let mut pages = 0;
    for _ in 0..sizes.page_runs {
        let start = Instant::now();
        let (items, n) = list_paged(&mut connection, &whole, objects).await?;
        samples.push(start.elapsed());
        ensure!(
            items == objects,
            "paged through {items} of {objects} ConfigMaps"
        );
        pages = n;
    }
    let cpu = meter.stop()?;
    let summary = summarize_samples(&samples);
    let label = format!(
        "list: {} ConfigMaps, limit={PAGE} ({pages} pages)",
        report::count(objects)
    );
    rows.push(
        Row::new(
            label.clone(),
            format!(
                "{} per list (median of {})",
                report::millis(summary.p50),
                summary.count
            ),
        )
        .latency(summary),
    );
    rows.push(cpu.row(&label, samples.len() as u64, "list"));
    Ok(rows)
}

/// Lists `path` whole; returns the answer.
async fn list_whole(connection: &mut Connection, path: &str) -> Result<bytes::Bytes> {
    connection.call(Call::get(path)).await
}

/// Lists `path` in pages of [`PAGE`]; returns how many items and pages it read. Stops with an
/// error after more pages than `objects` can fill.
pub(in crate::bench) async fn list_paged(
    connection: &mut Connection,
    path: &str,
    objects: u64,
) -> Result<(u64, u64)> {
    let max_pages = objects / PAGE + 2;
    let mut token: Option<String> = None;
    let (mut items, mut pages) = (0, 0);
    loop {
        ensure!(
            pages < max_pages,
            "more than {max_pages} pages for {objects} objects"
        );
        let query = match &token {
            None => format!("{path}?limit={PAGE}"),
            Some(token) => format!("{path}?limit={PAGE}&continue={}", encode(token)),
        };
        let page = parse(&connection.call(Call::get(query)).await?)?;
        items += page.items.len() as u64;
        pages += 1;
        match page.metadata.continue_token.filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next),
            None => return Ok((items, pages)),
        }
    }
}

/// Reads a list answer.
pub(in crate::bench) fn parse(body: &[u8]) -> Result<ListPage> {
    serde_json::from_slice(body).context("the list answer does not decode")
}

/// Percent-encodes a query value (continue tokens are base64, whose `+`, `/` and `=` must be
/// escaped).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_should_escape_base64_punctuation() {
        assert_eq!(encode("ab+/c=="), "ab%2B%2Fc%3D%3D");
    }

    #[test]
    fn parse_should_read_items_and_the_continue_token() {
        let page = parse(br#"{"metadata":{"continue":"x"},"items":[{"a":1},{}]}"#).expect("parses");
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.metadata.continue_token.as_deref(), Some("x"));
        let last = parse(br#"{"metadata":{},"items":[]}"#).expect("parses");
        assert!(last.metadata.continue_token.is_none());
    }
}
