//! Creates: [`CLIENTS`] concurrent clients `POST` 1 KiB ConfigMaps into `default`, first over
//! HTTP/1.1 (one keep-alive connection each), then over HTTP/2 (streams multiplexed on
//! [`HTTP2_CONNECTIONS`](super::load::HTTP2_CONNECTIONS) connections). Reports creates per second, the latency from sending a
//! request to the end of its answer, and the CPU both processes used.

use std::sync::Arc;

use anyhow::{ensure, Result};

use super::client::{Call, Protocol};
use super::load::{self, Budget, MakeCall, CLIENTS};
use super::Harness;
use crate::bench::report::{self, Row};
use crate::bench::usage::Meter;

/// The names of the ConfigMaps created over HTTP/1.1 (`cm-h1-000042`), which the gets read.
pub(super) const PREFIX: &str = "cm-h1";
/// The names of those created over HTTP/2.
const PREFIX_HTTP2: &str = "cm-h2";
/// The namespace created in.
pub(super) const NAMESPACE: &str = "default";
/// Creates per second to reach.
const TARGET: u64 = 10_000;

/// Runs the create benchmark over both protocols.
pub(super) async fn bench_creates(harness: &mut Harness) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let prefix = match protocol {
            Protocol::Http1 => PREFIX,
            Protocol::Http2 => PREFIX_HTTP2,
        };
        let label = format!("creates: {}", load::clients_label(protocol));
        eprintln!("[{label}]");
        let connections = load::clients(&harness.client, protocol, CLIENTS).await?;
        let path = load::configmaps(NAMESPACE);
        let make: MakeCall = Arc::new(move |i| {
            Call::post_json(path.clone(), load::configmap(&load::name(prefix, i), 0))
        });
        let sizes = harness.sizes;
        let meter = Meter::start(harness.server.pid())?;
        let ran = load::run(
            connections,
            Budget::new(sizes.creates, sizes.run_time),
            make,
        )
        .await?;
        let cpu = meter.stop()?;
        ensure!(
            ran.ops > 0,
            "no create finished within {:?}",
            sizes.run_time
        );
        harness.objects += ran.ops;
        if protocol == Protocol::Http1 {
            harness.created = ran.ops;
        }
        rows.push(
            Row::new(
                format!("{label}, 1 KiB ConfigMaps"),
                format!(
                    "{} creates/s ({} in {:.2} s)",
                    report::rate(ran.ops, ran.elapsed),
                    report::count(ran.ops),
                    ran.elapsed.as_secs_f64()
                ),
            )
            .latency(ran.latencies.summary())
            .target(
                format!("≥ {}/s", report::count(TARGET)),
                report::per_second(ran.ops, ran.elapsed) >= TARGET,
            ),
        );
        rows.push(cpu.row(&label, ran.ops, "create"));
    }
    Ok(rows)
}
