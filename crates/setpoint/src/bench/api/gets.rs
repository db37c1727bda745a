//! Gets: [`CLIENTS`] concurrent clients `GET` existing ConfigMaps by name, in a scattered order,
//! over HTTP/1.1 and over HTTP/2. They read the ConfigMaps the create benchmark left, or, when
//! it did not run, [`OBJECTS`] created first (untimed). A get is a consistent read of the store.

use std::sync::Arc;

use anyhow::{ensure, Result};

use super::client::{Call, Protocol};
use super::creates::{NAMESPACE, PREFIX};
use super::load::{self, Budget, MakeCall, CLIENTS};
use super::Harness;
use crate::bench::report::{self, Row};
use crate::bench::usage::Meter;

/// The ConfigMaps to create for the gets when the create benchmark did not run.
const OBJECTS: u64 = 10_000;

/// Runs the get benchmark over both protocols.
pub(super) async fn bench_gets(harness: &mut Harness) -> Result<Vec<Row>> {
    let sizes = harness.sizes;
    if harness.created == 0 {
        eprintln!("[gets] creating {OBJECTS} ConfigMaps to read");
        load::populate(&harness.client, NAMESPACE, PREFIX, OBJECTS, sizes.run_time).await?;
        harness.created = OBJECTS;
        harness.objects += OBJECTS;
    }
    let objects = harness.created;
    let mut rows = Vec::new();
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let label = format!("gets: {}", load::clients_label(protocol));
        eprintln!("[{label}]");
        let connections = load::clients(&harness.client, protocol, CLIENTS).await?;
        let path = load::configmaps(NAMESPACE);
        let make: MakeCall = Arc::new(move |i| {
            Call::get(format!(
                "{path}/{}",
                load::name(PREFIX, scatter(i, objects))
            ))
        });
        let meter = Meter::start(harness.server.pid())?;
        let ran = load::run(connections, Budget::new(sizes.gets, sizes.run_time), make).await?;
        let cpu = meter.stop()?;
        ensure!(ran.ops > 0, "no get finished within {:?}", sizes.run_time);
        rows.push(
            Row::new(
                format!("{label}, of {} ConfigMaps", report::count(objects)),
                format!(
                    "{} gets/s ({} in {:.2} s)",
                    report::rate(ran.ops, ran.elapsed),
                    report::count(ran.ops),
                    ran.elapsed.as_secs_f64()
                ),
            )
            .latency(ran.latencies.summary()),
        );
        rows.push(cpu.row(&label, ran.ops, "get"));
    }
    Ok(rows)
}

/// The object operation `i` reads, out of `objects`: a fixed pseudo-random pick (Fibonacci
/// hashing), so that consecutive operations read far-apart keys and every run reads the same.
fn scatter(i: u64, objects: u64) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16) % objects.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_should_stay_in_range_and_spread() {
        let picks: std::collections::HashSet<u64> = (0..1000).map(|i| scatter(i, 100)).collect();
        assert!(picks.iter().all(|&p| p < 100));
        assert!(picks.len() > 90, "{}", picks.len());
    }
}
