//! `setpoint bench streams`: exec and port-forward through the API server to the node agent of
//! a `setpoint server` child (this executable, its own agent, pods as processes).
//!
//! - exec round trips: `kubectl exec sleeper -- true`, `--runs` times one after another, wall
//!   time from start to exit (kubectl's own start-up included: what a user waits); then the
//!   same exec over a WebSocket (`v5.channel.k8s.io`) from Rust — TCP, TLS, upgrade, until the
//!   exit status arrives — which leaves kubectl's start-up out.
//! - port-forward throughput: `--mib` MiB to a sink process in a pod (`setpoint debug
//!   stream-sink`), which answers how much it read: through `kubectl port-forward` (a local
//!   TCP port; kubectl 1.31+ tunnels SPDY in a WebSocket) and over a direct WebSocket
//!   port-forward (`v4.channel.k8s.io`, 256 KiB messages).

mod ws;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::json;
use setpoint_runtime::k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::kube::api::PostParams;
use setpoint_runtime::Client;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::Command;

use super::kubeconfig::Endpoint;
use super::latency::{summarize_samples, Summary};
use super::machine::Machine;
use super::report::{self, Report, Row};
use super::server::ServerProcess;
use crate::cli::StreamsBenchArgs;
use ws::WsClient;

/// Where the pods run.
const NAMESPACE: &str = "default";
/// The bytes of one write (and one WebSocket message) of a transfer.
const CHUNK: usize = 256 * 1024;

/// Runs `setpoint bench streams` and prints its results, as text and as markdown.
pub(crate) async fn bench_streams(args: StreamsBenchArgs) -> Result<()> {
    let parent = args.dir.clone().unwrap_or_else(super::default_parent);
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let root = tempfile::Builder::new()
        .prefix("setpoint-bench-streams-")
        .tempdir_in(&parent)
        .with_context(|| format!("creating a temporary directory in {}", parent.display()))?;
    let machine = Machine::describe(root.path());
    eprintln!("benchmarking streams in {}", root.path().display());
    eprintln!("{machine}");
    let (mut server, endpoint) = ServerProcess::start(root.path(), &[]).await?;
    let run = run(&server, endpoint, &args, root.path());
    let outcome = tokio::select! {
        outcome = run => outcome,
        interrupted = tokio::signal::ctrl_c() => {
            interrupted.context("waiting for Ctrl-C")?;
            Err(anyhow::anyhow!("interrupted"))
        }
    };
    let outcome = server.check_running().and(outcome);
    let log = server.log_tail();
    server.stop().await?;
    // The server's agent leaves its pods' processes running when killed: stop them.
    let cleanup = Command::new(std::env::current_exe().context("finding this executable")?)
        .args(["agent", "cleanup", "--data-dir"])
        .arg(root.path().join("data"))
        .stdout(Stdio::null())
        .status()
        .await
        .context("running setpoint agent cleanup")?;
    ensure!(
        cleanup.success(),
        "setpoint agent cleanup failed ({cleanup})"
    );
    let rows = outcome.with_context(|| log)?;
    root.close()
        .context("deleting the benchmark's data directory")?;
    let report = Report {
        title: format!(
            "setpoint bench streams --runs {} --mib {} (setpoint {})",
            args.runs,
            args.mib,
            env!("CARGO_PKG_VERSION")
        ),
        machine,
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    Ok(())
}

async fn run(
    server: &ServerProcess,
    endpoint: Endpoint,
    args: &StreamsBenchArgs,
    root: &Path,
) -> Result<Vec<Row>> {
    let client = Client::from_kubeconfig(server.kubeconfig())
        .await
        .context("reading the server's kubeconfig")?;
    let exe = std::env::current_exe().context("finding this executable")?;
    let exe = exe.to_string_lossy().into_owned();
    // A port free now (pods may share the host's network).
    let sink_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("finding a free port")?
        .port();
    create_pod(&client, "sleeper", &["sleep", "3600"]).await?;
    create_pod(
        &client,
        "sink",
        &[
            &exe,
            "debug",
            "stream-sink",
            "--port",
            &sink_port.to_string(),
        ],
    )
    .await?;
    wait_running(&client, &["sleeper", "sink"]).await?;
    let ws = WsClient::new(endpoint)?;
    let kubeconfig = server.kubeconfig();
    let mut rows = Vec::new();

    let mut samples = Vec::new();
    for _ in 0..args.runs {
        samples.push(kubectl_exec(kubeconfig, root).await?);
    }
    rows.push(exec_row(
        "kubectl exec sleeper -- true",
        &samples,
        args.runs,
    ));
    let mut samples = Vec::new();
    for _ in 0..args.runs {
        samples.push(ws_exec(&ws).await?);
    }
    rows.push(exec_row(
        "exec `true` over WebSocket v5 from Rust (no kubectl)",
        &samples,
        args.runs,
    ));

    let bytes = args.mib * 1024 * 1024;
    let took = kubectl_port_forward(kubeconfig, root, sink_port, bytes).await?;
    rows.push(throughput_row("kubectl port-forward → sink", bytes, took));
    let took = ws_port_forward(&ws, sink_port, bytes).await?;
    rows.push(throughput_row(
        "port-forward over WebSocket v4 from Rust → sink",
        bytes,
        took,
    ));
    Ok(rows)
}

/// A row of exec round trips: percentiles, p90 in the result.
fn exec_row(name: &str, samples: &[Duration], runs: u32) -> Row {
    let summary: Summary = summarize_samples(samples);
    let p90 = nearest_rank(samples, 0.9);
    Row::new(name, format!("{runs} runs, p90 {}", report::millis(p90)))
        .latency(summary)
        .target("p50 ≤ 50 ms", summary.p50 <= Duration::from_millis(50))
}

/// The nearest-rank quantile `q` of `samples`.
fn nearest_rank(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.saturating_sub(1))
        .copied()
        .unwrap_or_default()
}

fn throughput_row(name: &str, bytes: u64, took: Duration) -> Row {
    let rate = bytes as f64 / took.as_secs_f64() / 1e6;
    Row::new(
        name,
        format!(
            "{:.0} MB/s ({} in {:.2} s)",
            rate,
            report::mib(bytes),
            took.as_secs_f64()
        ),
    )
    .target("≥ 200 MB/s", rate >= 200.0)
}

async fn create_pod(client: &Client, name: &str, command: &[&str]) -> Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": command}]},
    }))?;
    client
        .namespaced_api::<Pod>(NAMESPACE)
        .create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    Ok(())
}

async fn wait_running(client: &Client, names: &[&str]) -> Result<()> {
    let pods = client.namespaced_api::<Pod>(NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(120);
    for name in names {
        loop {
            let running = pods
                .get(name)
                .await
                .ok()
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
                .is_some_and(|phase| phase == "Running");
            if running {
                break;
            }
            if Instant::now() >= deadline {
                bail!("pod {name} not Running within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

fn kubectl(kubeconfig: &Path, home: &Path) -> Command {
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// One `kubectl exec sleeper -- true`, start to exit.
async fn kubectl_exec(kubeconfig: &Path, home: &Path) -> Result<Duration> {
    let started = Instant::now();
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        kubectl(kubeconfig, home)
            .args(["exec", "-n", NAMESPACE, "sleeper", "--", "true"])
            .output(),
    )
    .await
    .context("kubectl exec took over 60 s")?
    .context("running kubectl (is it on PATH?)")?;
    let took = started.elapsed();
    ensure!(
        output.status.success(),
        "kubectl exec failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(took)
}

/// One exec of `true` over WebSocket v5: connect, upgrade, wait for the status on channel 3.
async fn ws_exec(ws: &WsClient) -> Result<Duration> {
    let started = Instant::now();
    let path = format!(
        "/api/v1/namespaces/{NAMESPACE}/pods/sleeper/exec?command=true&stdout=true&stderr=true"
    );
    let mut socket = ws.open(&path, "v5.channel.k8s.io").await?;
    loop {
        let Some(message) = socket.next().await? else {
            bail!("the exec stream closed without a status");
        };
        if message.first() == Some(&3) {
            let status: serde_json::Value =
                serde_json::from_slice(&message[1..]).context("decoding the exec status")?;
            ensure!(status["status"] == "Success", "exec failed: {status}");
            return Ok(started.elapsed());
        }
    }
}

/// Sends `bytes` through `kubectl port-forward` to the sink; the time from the first byte
/// sent to the sink's count received.
async fn kubectl_port_forward(
    kubeconfig: &Path,
    home: &Path,
    sink_port: u16,
    bytes: u64,
) -> Result<Duration> {
    let mut child = kubectl(kubeconfig, home)
        .args([
            "port-forward",
            "-n",
            NAMESPACE,
            "pod/sink",
            &format!(":{sink_port}"),
            "--address",
            "127.0.0.1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(home.join("port-forward.log"))
                .context("creating kubectl's log")?,
        ))
        .spawn()
        .context("running kubectl port-forward (is kubectl on PATH?)")?;
    let stdout = child.stdout.take().context("kubectl's output")?;
    let mut lines = BufReader::new(stdout).lines();
    // `Forwarding from 127.0.0.1:PORT -> 17001`
    let local = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                if let Some((port, _)) = rest.split_once(' ') {
                    return Ok::<_, anyhow::Error>(port.parse::<u16>()?);
                }
            }
        }
        bail!("kubectl port-forward ended before forwarding")
    })
    .await
    .context("kubectl port-forward did not start within 60 s")?
    .with_context(|| std::fs::read_to_string(home.join("port-forward.log")).unwrap_or_default())?;
    let mut connection = tokio::net::TcpStream::connect(("127.0.0.1", local))
        .await
        .context("connecting to kubectl's local port")?;
    connection.set_nodelay(true)?;
    let started = Instant::now();
    let transfer = async {
        let (mut read, mut write) = connection.split();
        let send = async {
            write.write_all(&bytes.to_be_bytes()).await?;
            let chunk = vec![0x5a_u8; CHUNK];
            let mut left = bytes;
            while left > 0 {
                let n = usize::try_from(left.min(CHUNK as u64))?;
                write.write_all(&chunk[..n]).await?;
                left -= n as u64;
            }
            Ok::<_, anyhow::Error>(())
        };
        let receive = async {
            let mut count = [0_u8; 8];
            read.read_exact(&mut count).await?;
            Ok::<_, anyhow::Error>(u64::from_be_bytes(count))
        };
        let ((), received) = tokio::try_join!(send, receive)?;
        Ok::<_, anyhow::Error>(received)
    };
    let received = tokio::time::timeout(Duration::from_secs(600), transfer)
        .await
        .context("the port-forward transfer took over 600 s")??;
    let took = started.elapsed();
    let _ = child.kill().await;
    ensure!(
        received == bytes,
        "the sink read {received} bytes of {bytes}"
    );
    Ok(took)
}

/// Sends `bytes` over a WebSocket port-forward to the sink; the time from the upgrade to the
/// sink's count received.
async fn ws_port_forward(ws: &WsClient, sink_port: u16, bytes: u64) -> Result<Duration> {
    let started = Instant::now();
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/sink/portforward?ports={sink_port}");
    let mut socket = ws.open(&path, "v4.channel.k8s.io").await?;
    // The server's first message on each of the port's channels (0 data, 1 error) is the port.
    for _ in 0..2 {
        socket
            .next()
            .await?
            .context("the port-forward closed at once")?;
    }
    let transfer = async {
        socket.send(0, &bytes.to_be_bytes()).await?;
        let chunk = vec![0x5a_u8; CHUNK];
        let mut left = bytes;
        while left > 0 {
            let n = usize::try_from(left.min(CHUNK as u64))?;
            socket.send(0, &chunk[..n]).await?;
            left -= n as u64;
        }
        let mut answer = Vec::new();
        while answer.len() < 8 {
            let message = socket
                .next()
                .await?
                .context("the port-forward closed before the sink answered")?;
            match message.split_first() {
                Some((0, data)) => answer.extend_from_slice(data),
                Some((1, error)) if !error.is_empty() => {
                    bail!("port-forward error: {}", String::from_utf8_lossy(error))
                }
                _ => {}
            }
        }
        let count: [u8; 8] = answer[..8].try_into()?;
        Ok::<_, anyhow::Error>(u64::from_be_bytes(count))
    };
    let received = tokio::time::timeout(Duration::from_secs(600), transfer)
        .await
        .context("the port-forward transfer took over 600 s")??;
    let took = started.elapsed();
    ensure!(
        received == bytes,
        "the sink read {received} bytes of {bytes}"
    );
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_should_pick_the_sample_at_or_above_the_quantile() {
        let samples: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        assert_eq!(nearest_rank(&samples, 0.9), Duration::from_millis(9));
        assert_eq!(nearest_rank(&samples, 0.5), Duration::from_millis(5));
        assert_eq!(nearest_rank(&[], 0.9), Duration::ZERO);
    }
}
