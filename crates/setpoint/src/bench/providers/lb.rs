//! The load balancer's data plane against a direct connection: a `setpoint lb-proxy` child
//! process (the balancer a LoadBalancer Service gets) with a configuration written here, in
//! front of two servers of this process on 127.0.0.1 — a sink (reads to the end, answers `ok`)
//! and an echo. Measured through the balancer and directly: throughput of one and of eight
//! streams (MB/s; five runs each way, alternated, medians compared), and the round trip of a 64-byte request and its answer on one connection
//! (p50/p99). Goals (issue 21): ≥ 70 % of direct throughput, p50 ≤ direct + 0.2 ms. Twice,
//! side by side: the balancer forwarding in user space, then in the kernel (its nftables
//! table; root and nft only, else a row says it was not measured).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use setpoint_providers::lb::config::{
    digest, state_path, Algorithm, BalancerConfig, Forwarding, HealthCheck, PortConfig, Protocol,
    ProxyState,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::bench::latency::Latencies;
use crate::bench::report::{count, millis, Row};

/// Throughput goal: this share of direct.
const THROUGHPUT_GOAL: f64 = 0.70;
/// Latency goal: p50 no more than this above direct.
const LATENCY_GOAL: Duration = Duration::from_micros(200);
/// One write of a stream.
const CHUNK: usize = 256 * 1024;
/// Throughput runs each way (alternated; the medians are compared).
const ROUNDS: usize = 5;
/// The request and answer of a round trip.
const MESSAGE: usize = 64;

/// Runs the benchmark in `dir`; its rows: each measurement with the balancer forwarding in
/// user space, then (as root with nft) in the kernel, side by side on the same servers.
pub(super) async fn run(dir: &Path, quick: bool) -> Result<Vec<Row>> {
    let sink = sink_server().await?;
    let echo = echo_server().await?;
    let mut rows = Vec::new();
    for forwarding in [Forwarding::Userspace, Forwarding::Kernel] {
        rows.extend(run_one(dir, quick, sink, echo, forwarding).await?);
    }
    Ok(rows)
}

/// The rows of one balancer forwarding by `forwarding` in front of `sink` and `echo`.
async fn run_one(
    dir: &Path,
    quick: bool,
    sink: SocketAddr,
    echo: SocketAddr,
    forwarding: Forwarding,
) -> Result<Vec<Row>> {
    let (sink_port, echo_port) = (free_port()?, free_port()?);
    let config = BalancerConfig {
        address: "127.0.0.1".parse()?,
        algorithm: Algorithm::RoundRobin,
        health_check: HealthCheck::default(),
        forwarding,
        ports: vec![port(sink_port, sink), port(echo_port, echo)],
    };
    let mode = match forwarding {
        Forwarding::Userspace => "user space",
        Forwarding::Kernel => "kernel",
    };
    let path = dir.join(format!("balancer-{}.json", mode.replace(' ', "")));
    let bytes = config.to_bytes();
    std::fs::write(&path, &bytes).context("writing the balancer's configuration")?;
    let mut balancer = tokio::process::Command::new(std::env::current_exe()?)
        .arg("lb-proxy")
        .arg("--config")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting setpoint lb-proxy")?;
    let state = wait_applied(&path, &digest(&bytes)).await?;
    if forwarding == Forwarding::Kernel && state.kernel.len() != config.ports.len() {
        stop(&mut balancer).await;
        return Ok(vec![Row::new(
            "lb (kernel forwarding)",
            "not measured: the balancer could not program nftables (needs root and nft)",
        )]);
    }
    let through_sink: SocketAddr = ([127, 0, 0, 1], sink_port).into();
    let through_echo: SocketAddr = ([127, 0, 0, 1], echo_port).into();

    let per_stream: u64 = if quick { 64 << 20 } else { 1 << 30 };
    let round_trips = if quick { 2_000 } else { 20_000 };
    let rounds = if quick { 1 } else { ROUNDS };
    let mut rows = Vec::new();
    for streams in [1usize, 8] {
        let bytes = if streams == 1 {
            per_stream
        } else {
            per_stream / 4
        };
        // Alternated, and the median of each kept: a busy machine swings single runs.
        let (mut direct, mut balanced) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            direct.push(throughput(sink, streams, bytes).await?);
            balanced.push(throughput(through_sink, streams, bytes).await?);
        }
        let (direct, balanced) = (median(direct), median(balanced));
        let share = balanced / direct;
        rows.push(
            Row::new(
                format!(
                    "lb throughput ({mode}), {streams} stream{}",
                    if streams == 1 { "" } else { "s" }
                ),
                format!(
                    "{balanced:.0} MB/s through the balancer, {direct:.0} MB/s direct ({:.0} %; medians of {rounds})",
                    share * 100.0
                ),
            )
            .target("≥ 70 % of direct", share >= THROUGHPUT_GOAL),
        );
    }
    let direct = round_trip(echo, round_trips).await?.summary();
    let balanced = round_trip(through_echo, round_trips).await?.summary();
    rows.push(
        Row::new(
            format!("lb round trip ({mode}), {MESSAGE} B"),
            format!(
                "{} round trips; direct p50 {}, p99 {}",
                count(balanced.count),
                millis(direct.p50),
                millis(direct.p99)
            ),
        )
        .latency(balanced)
        .target(
            "p50 ≤ direct + 0.2 ms",
            balanced.p50 <= direct.p50 + LATENCY_GOAL,
        ),
    );
    stop(&mut balancer).await;
    Ok(rows)
}

/// The middle value (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Stops the balancer with SIGTERM (so it deletes its kernel table), SIGKILL if it lingers.
async fn stop(balancer: &mut tokio::process::Child) {
    let pid = balancer
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    if tokio::time::timeout(Duration::from_secs(5), balancer.wait())
        .await
        .is_err()
    {
        let _ = balancer.kill().await;
    }
}

fn port(port: u16, backend: SocketAddr) -> PortConfig {
    PortConfig {
        name: String::new(),
        protocol: Protocol::Tcp,
        port,
        backends: vec![backend],
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until the balancer reports the configuration of `digest` applied; its state.
async fn wait_applied(path: &Path, digest: &str) -> Result<ProxyState> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state: Option<ProxyState> = std::fs::read(state_path(path))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(state) = state.filter(|s| s.applied == digest) {
            if !state.errors.is_empty() {
                bail!("the balancer could not listen: {}", state.errors.join("; "));
            }
            return Ok(state);
        }
        if Instant::now() > deadline {
            bail!("the balancer never applied its configuration");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A server that reads each connection to its end, then answers `ok`.
async fn sink_server() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0u8; CHUNK];
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                }
                let _ = stream.write_all(b"ok").await;
            });
        }
    });
    Ok(addr)
}

/// A server that sends back every message of [`MESSAGE`] bytes.
async fn echo_server() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buffer = [0u8; MESSAGE];
                while stream.read_exact(&mut buffer).await.is_ok() {
                    if stream.write_all(&buffer).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// MB/s of `streams` connections to `at` each sending `bytes` (until the sink's `ok`).
async fn throughput(at: SocketAddr, streams: usize, bytes: u64) -> Result<f64> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(at).await?;
                let chunk = vec![7u8; CHUNK];
                let mut sent = 0u64;
                while sent < bytes {
                    stream.write_all(&chunk).await?;
                    sent += CHUNK as u64;
                }
                stream.shutdown().await?;
                let mut ok = [0u8; 2];
                stream.read_exact(&mut ok).await?;
                Ok::<u64, std::io::Error>(sent)
            })
        })
        .collect();
    let mut total = 0u64;
    for task in tasks {
        total += task.await.context("a stream")?.context("a stream")?;
    }
    Ok(total as f64 / 1e6 / started.elapsed().as_secs_f64())
}

/// `n` round trips of a [`MESSAGE`]-byte request on one connection to `at`.
async fn round_trip(at: SocketAddr, n: usize) -> Result<Latencies> {
    let mut stream = TcpStream::connect(at).await?;
    stream.set_nodelay(true)?;
    let request = [1u8; MESSAGE];
    let mut answer = [0u8; MESSAGE];
    let mut latencies = Latencies::new();
    // A few to warm the path up.
    for i in 0..n + 100 {
        let started = Instant::now();
        stream.write_all(&request).await?;
        stream.read_exact(&mut answer).await?;
        if i >= 100 {
            latencies.record(started.elapsed());
        }
    }
    Ok(latencies)
}
