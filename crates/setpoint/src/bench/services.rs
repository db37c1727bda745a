//! `setpoint bench services`: the node agent's nftables Service rules for N Services × M
//! endpoints — computing them, `nft -f` of the full sync, and of one incremental change (an
//! endpoint added to one Service) — applied in a throwaway network namespace (`unshare -n`),
//! so the host's rules are untouched. Goal: a full sync of 1,000 × 10 in ≤ 2 s. Then the
//! userspace fallback's throughput: bytes through a NodePort listener on 127.0.0.1.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use super::machine::Machine;
use super::report::{count, millis, Report, Row, Verdict};
use crate::cli::ServicesBenchArgs;

/// The ≤ 2 s goal for a full sync (issue 18).
const FULL_SYNC_GOAL: Duration = Duration::from_secs(2);

pub(crate) async fn bench_services(args: &ServicesBenchArgs) -> Result<()> {
    let services = if args.quick { 100 } else { args.services };
    let sets = setpoint_agent::service_rulesets("setpoint-bench", services, args.endpoints);
    let dir = tempfile::tempdir().context("a scratch directory")?;
    let full = dir.path().join("full.nft");
    let incremental = dir.path().join("incremental.nft");
    std::fs::write(&full, &sets.full)?;
    std::fs::write(&incremental, &sets.incremental)?;
    let (full_time, incremental_time) = apply_in_netns(dir.path(), &full, &incremental)?;
    let label = format!(
        "{} Services × {} endpoints",
        count(services as u64),
        args.endpoints
    );
    let rows = vec![
        Row::new(
            format!("compute full sync, {label}"),
            format!(
                "{} ({} lines)",
                millis(sets.full_compute),
                count(sets.full.lines().count() as u64)
            ),
        ),
        Row::new(
            format!("nft full sync, {label}"),
            format!(
                "{} ({} chains)",
                millis(full_time),
                count(sets.chains as u64)
            ),
        )
        .target("≤ 2 s (1,000 × 10)", full_time <= FULL_SYNC_GOAL),
        Row::new(
            "compute incremental sync (1 endpoint added)",
            millis(sets.incremental_compute),
        ),
        Row::new(
            "nft incremental sync (1 endpoint added)",
            format!(
                "{} ({} lines)",
                millis(incremental_time),
                sets.incremental.lines().count()
            ),
        ),
    ];
    let mut rows = rows;
    let bytes: u64 = if args.quick { 64 << 20 } else { 1 << 30 };
    let took = setpoint_agent::userspace_throughput(bytes)
        .await
        .context("the userspace fallback's throughput")?;
    rows.push(Row::new(
        format!("userspace fallback, one connection, {} MiB", bytes >> 20),
        format!(
            "{:.0} MiB/s ({})",
            (bytes >> 20) as f64 / took.as_secs_f64().max(1e-9),
            millis(took)
        ),
    ));
    let missed = rows.iter().any(|r| r.verdict == Verdict::Missed);
    let report = Report {
        title: format!(
            "setpoint bench services{} (setpoint {})",
            if args.quick { " --quick" } else { "" },
            env!("CARGO_PKG_VERSION")
        ),
        machine: Machine::describe(dir.path()),
        rows,
    };
    println!("{}", report.to_text());
    println!("{}", report.to_markdown());
    if missed {
        bail!("the full sync missed its goal");
    }
    Ok(())
}

/// Runs `nft -f full` then `nft -f incremental` in a new network namespace; their wall times.
fn apply_in_netns(dir: &Path, full: &Path, incremental: &Path) -> Result<(Duration, Duration)> {
    let script = dir.join("run.sh");
    std::fs::write(
        &script,
        format!(
            "set -e\na=$(date +%s%N)\nnft -f {}\nb=$(date +%s%N)\nnft -f {}\nc=$(date +%s%N)\necho $((b-a)) $((c-b))\n",
            full.display(),
            incremental.display()
        ),
    )?;
    let out = Command::new("unshare")
        .args(["-n", "sh"])
        .arg(&script)
        .output()
        .context("running unshare -n (needs root) with nft")?;
    if !out.status.success() {
        bail!(
            "nft in a throwaway network namespace failed (needs root and nft): {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let nanos: Vec<u64> = text
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let [a, b] = nanos[..] else {
        bail!("unexpected timing output: {text}");
    };
    Ok((Duration::from_nanos(a), Duration::from_nanos(b)))
}
