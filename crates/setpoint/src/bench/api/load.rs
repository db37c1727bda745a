//! What the API benchmarks share: workload sizes, the 1 KiB ConfigMaps they write, an
//! operation budget, and [`run`], which drives concurrent clients through a budget of requests
//! and records each one's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::json;
use tokio::task::JoinSet;

use super::client::{Call, Client, Connection, Protocol};
use crate::bench::latency::Latencies;

/// Concurrent clients of the create and get benchmarks.
pub(in crate::bench) const CLIENTS: usize = 32;
/// Connections the [`CLIENTS`] share over HTTP/2 (over HTTP/1.1 each has its own).
pub(in crate::bench) const HTTP2_CONNECTIONS: usize = 4;
/// The size of each ConfigMap's `payload` value.
pub(in crate::bench) const PAYLOAD_BYTES: usize = 1024;

/// How much work each benchmark does: the full sizes, or smaller ones for `--quick`.
#[derive(Clone, Copy, Debug)]
pub(in crate::bench) struct Sizes {
    /// Creates per protocol.
    pub(in crate::bench) creates: u64,
    /// Gets per protocol.
    pub(in crate::bench) gets: u64,
    /// Time limit of each create or get run, whichever of the two comes first.
    pub(in crate::bench) run_time: Duration,
    /// Objects in the listed namespace.
    pub(in crate::bench) list_objects: u64,
    /// Timed whole lists.
    pub(in crate::bench) list_runs: usize,
    /// Timed paged lists.
    pub(in crate::bench) page_runs: usize,
    /// Writes the watchers follow.
    pub(in crate::bench) watch_writes: u64,
    /// Time limit for those writes.
    pub(in crate::bench) watch_time: Duration,
    /// Writes the watchers replay from the server's event window (which holds 10,000).
    pub(in crate::bench) replay_writes: u64,
    /// Objects of each kind the apply benchmark writes to.
    pub(in crate::bench) apply_objects: u64,
    /// Timed writes of each kind and patch type.
    pub(in crate::bench) apply_writes: u64,
}

impl Sizes {
    /// The full sizes, or the `--quick` ones.
    pub(in crate::bench) fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                creates: 10_000,
                gets: 20_000,
                run_time: Duration::from_secs(30),
                list_objects: 10_000,
                list_runs: 10,
                page_runs: 5,
                watch_writes: 5_000,
                watch_time: Duration::from_secs(30),
                replay_writes: 2_000,
                apply_objects: 1_000,
                apply_writes: 5_000,
            }
        } else {
            Sizes {
                creates: 50_000,
                gets: 100_000,
                run_time: Duration::from_secs(120),
                list_objects: 10_000,
                list_runs: 30,
                page_runs: 10,
                watch_writes: 20_000,
                watch_time: Duration::from_secs(120),
                replay_writes: 5_000,
                apply_objects: 2_000,
                apply_writes: 20_000,
            }
        }
    }
}

/// The path of the ConfigMaps of `namespace`.
pub(in crate::bench) fn configmaps(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps")
}

/// The JSON of a ConfigMap called `name` with [`PAYLOAD_BYTES`] of printable pseudo-random data
/// (the same every run) under `payload`, and `sent` under `sent`.
pub(in crate::bench) fn configmap(name: &str, sent: u64) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"sent": sent.to_string(), "payload": payload()},
    })
    .to_string()
}

/// The 1 KiB payload.
pub(in crate::bench) fn payload() -> &'static str {
    static PAYLOAD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAYLOAD.get_or_init(|| {
        let mut rng = SmallRng::seed_from_u64(0x5e7_901);
        (0..PAYLOAD_BYTES)
            .map(|_| char::from(rng.gen_range(b'a'..=b'z')))
            .collect()
    })
}

/// Creates the namespace `name`.
pub(in crate::bench) async fn create_namespace(
    connection: &mut Connection,
    name: &str,
) -> Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    connection
        .call(Call::post_json("/api/v1/namespaces", body.to_string()))
        .await
        .with_context(|| format!("creating the namespace {name}"))?;
    Ok(())
}

/// Connections for `clients` concurrent clients: over HTTP/1.1 one each, over HTTP/2 handles on
/// [`HTTP2_CONNECTIONS`] connections, spread evenly.
pub(in crate::bench) async fn clients(
    client: &Client,
    protocol: Protocol,
    clients: usize,
) -> Result<Vec<Connection>> {
    match protocol {
        Protocol::Http1 => client.connect_many(protocol, clients).await,
        Protocol::Http2 => {
            let connections = client.connect_many(protocol, HTTP2_CONNECTIONS).await?;
            (0..clients)
                .map(|i| connections[i % connections.len()].share())
                .collect()
        }
    }
}

/// How [`CLIENTS`] clients reach the server over `protocol`, for row names.
pub(in crate::bench) fn clients_label(protocol: Protocol) -> String {
    match protocol {
        Protocol::Http1 => format!("{CLIENTS} clients, HTTP/1.1 ({CLIENTS} connections)"),
        Protocol::Http2 => format!(
            "{CLIENTS} clients, HTTP/2 ({CLIENTS} streams on {HTTP2_CONNECTIONS} connections)"
        ),
    }
}

/// A budget of operations that concurrent clients draw from until it, or the time, runs out.
pub(in crate::bench) struct Budget {
    /// Operations handed out so far (may overshoot `ops` by one per client; those are refused).
    taken: AtomicU64,
    /// Most operations to hand out.
    ops: u64,
    /// No operation is handed out after this instant.
    deadline: Instant,
}

impl Budget {
    /// At most `ops` operations, none after `time` from now.
    pub(in crate::bench) fn new(ops: u64, time: Duration) -> Arc<Self> {
        Arc::new(Budget {
            taken: AtomicU64::new(0),
            ops,
            deadline: Instant::now() + time,
        })
    }

    /// Takes one operation: its index across all clients, or `None` once the budget is spent.
    pub(in crate::bench) fn take(&self) -> Option<u64> {
        if Instant::now() >= self.deadline {
            return None;
        }
        let n = self.taken.fetch_add(1, Ordering::Relaxed);
        (n < self.ops).then_some(n)
    }
}

/// What a [`run`] did.
pub(in crate::bench) struct Ran {
    /// Requests answered; they are operations `0..ops` of the budget.
    pub(in crate::bench) ops: u64,
    /// From the start of the run until the last answer.
    pub(in crate::bench) elapsed: Duration,
    /// The latency of every request, from sending it to the end of its answer's body.
    pub(in crate::bench) latencies: Latencies,
}

/// Builds the request of operation `i`.
pub(in crate::bench) type MakeCall = Arc<dyn Fn(u64) -> Call + Send + Sync>;

/// Sends requests from `budget` on every connection at once, each connection one request at a
/// time, until the budget is spent; every answer must have the status its call expects. The first failure
/// stops the run (the other clients are aborted).
pub(in crate::bench) async fn run(
    connections: Vec<Connection>,
    budget: Arc<Budget>,
    make: MakeCall,
) -> Result<Ran> {
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for mut connection in connections {
        let (budget, make) = (budget.clone(), make.clone());
        tasks.spawn(async move {
            let mut latencies = Latencies::new();
            let mut ops = 0u64;
            while let Some(i) = budget.take() {
                let call = make(i);
                let sent = Instant::now();
                connection.call(call).await?;
                latencies.record(sent.elapsed());
                ops += 1;
            }
            anyhow::Ok((ops, latencies))
        });
    }
    let mut ran = Ran {
        ops: 0,
        elapsed: Duration::ZERO,
        latencies: Latencies::new(),
    };
    while let Some(done) = tasks.join_next().await {
        let (ops, latencies) = done.context("a benchmark client panicked")??;
        ran.ops += ops;
        ran.latencies.merge(&latencies);
    }
    ran.elapsed = start.elapsed();
    Ok(ran)
}

/// Creates the ConfigMaps `{prefix}-{i}` for `i` in `0..n` in `namespace` with [`CLIENTS`]
/// HTTP/1.1 clients; untimed setup (bounded by `time`) for the benchmarks that need objects.
pub(in crate::bench) async fn populate(
    client: &Client,
    namespace: &str,
    prefix: &str,
    n: u64,
    time: Duration,
) -> Result<Ran> {
    let connections = clients(client, Protocol::Http1, CLIENTS).await?;
    let (path, prefix) = (configmaps(namespace), prefix.to_owned());
    let make: MakeCall =
        Arc::new(move |i| Call::post_json(path.clone(), configmap(&name(&prefix, i), 0)));
    let ran = run(connections, Budget::new(n, time), make).await?;
    anyhow::ensure!(
        ran.ops == n,
        "created only {} of {n} ConfigMaps in {time:?}",
        ran.ops
    );
    Ok(ran)
}

/// The name of object `i` with `prefix`: zero-padded, so that name order is index order.
pub(in crate::bench) fn name(prefix: &str, i: u64) -> String {
    format!("{prefix}-{i:06}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_should_hand_out_each_operation_once_until_its_deadline() {
        let budget = Budget::new(3, Duration::from_secs(60));
        let taken: Vec<_> = std::iter::from_fn(|| budget.take()).collect();
        assert_eq!(taken, [0, 1, 2]);
        assert_eq!(Budget::new(u64::MAX, Duration::ZERO).take(), None);
    }

    #[test]
    fn configmap_should_carry_a_one_kibibyte_payload_and_the_send_time() {
        let object: serde_json::Value =
            serde_json::from_str(&configmap("cm-000001", 42)).expect("json");
        assert_eq!(object["metadata"]["name"], "cm-000001");
        assert_eq!(object["data"]["sent"], "42");
        assert_eq!(
            object["data"]["payload"].as_str().map(str::len),
            Some(PAYLOAD_BYTES)
        );
    }

    #[test]
    fn names_should_sort_by_index() {
        assert!(name("cm", 9) < name("cm", 10));
    }
}
