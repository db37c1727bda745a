//! What a benchmark phase costs in CPU, for the server and for the load generator (this
//! process), read from `/proc/<pid>/stat` before and after; and a process's resident memory,
//! from `/proc/<pid>/status`. Both run on the same cores, so the load generator's share says
//! how much of the machine the server did not get.

use std::fs;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::bench::report::Row;

/// The user plus system CPU time `pid` (or this process, for `None`) has used, all threads.
pub(super) fn cpu_time(pid: Option<u32>) -> Result<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let stat = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let ticks = parse_stat_ticks(&stat).with_context(|| format!("parsing {path}: {stat:?}"))?;
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Ok(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// `utime + stime` (fields 14 and 15, in clock ticks) of a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may hold spaces and parentheses itself, so
/// fields are counted from the last `)`.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    // After the name: field 3 (state) is index 0, so utime (14) is index 11 and stime index 12.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The resident set size of `pid` (`VmRSS`), in bytes.
pub(super) fn rss_bytes(pid: u32) -> Result<u64> {
    Ok(memory(pid)?.rss)
}

/// A process's resident memory, from `/proc/<pid>/status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Memory {
    /// Resident now (`VmRSS`), in bytes.
    pub(super) rss: u64,
    /// The most it has been resident since it started or since [`reset_peak`] (`VmHWM`), in
    /// bytes.
    pub(super) peak: u64,
}

/// The resident memory of `pid`, now and at its peak.
pub(super) fn memory(pid: u32) -> Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let status = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_memory(&status).with_context(|| format!("no VmRSS or VmHWM in {path}"))
}

/// Resets the peak [`memory`] of `pid` reports to its resident memory now (writing `5` to
/// `/proc/<pid>/clear_refs`, Linux 4.0 and later; the process must be ours).
pub(super) fn reset_peak(pid: u32) -> Result<()> {
    let path = format!("/proc/{pid}/clear_refs");
    fs::write(&path, "5").with_context(|| format!("writing 5 to {path}"))
}

/// `VmRSS` and `VmHWM` of a `/proc/<pid>/status` text, in bytes.
fn parse_memory(status: &str) -> Option<Memory> {
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(Memory {
        rss: field("VmRSS:")?,
        peak: field("VmHWM:")?,
    })
}

/// CPU times at the start of a phase; [`Meter::stop`] turns them into a [`CpuUse`].
pub(super) struct Meter {
    /// The server process.
    server_pid: u32,
    /// When the phase started.
    start: Instant,
    /// The server's CPU time then.
    server: Duration,
    /// This process's CPU time then.
    generator: Duration,
}

impl Meter {
    /// Starts measuring the server `server_pid` and this process.
    pub(super) fn start(server_pid: u32) -> Result<Self> {
        Ok(Meter {
            server_pid,
            start: Instant::now(),
            server: cpu_time(Some(server_pid))?,
            generator: cpu_time(None)?,
        })
    }

    /// The CPU used since [`Meter::start`].
    pub(super) fn stop(self) -> Result<CpuUse> {
        Ok(CpuUse {
            wall: self.start.elapsed(),
            server: cpu_time(Some(self.server_pid))?.saturating_sub(self.server),
            generator: cpu_time(None)?.saturating_sub(self.generator),
        })
    }
}

/// The CPU a phase used.
#[derive(Clone, Copy, Debug)]
pub(super) struct CpuUse {
    /// How long the phase took.
    pub(super) wall: Duration,
    /// The server's CPU time during the phase.
    pub(super) server: Duration,
    /// The load generator's CPU time during the phase.
    pub(super) generator: Duration,
}

impl CpuUse {
    /// A table row: server CPU per `unit` (`ops` of them in the phase), in cores, and the load
    /// generator's cores and share of the CPU both used.
    pub(super) fn row(&self, name: &str, ops: u64, unit: &str) -> Row {
        let wall = self.wall.as_secs_f64().max(f64::EPSILON);
        let server = self.server.as_secs_f64();
        let generator = self.generator.as_secs_f64();
        let per_op = per_op(server / (ops.max(1) as f64));
        let share = 100.0 * generator / (server + generator).max(f64::EPSILON);
        Row::new(
            format!("{name}: CPU"),
            format!(
                "server {per_op}/{unit} ({:.2} cores); load generator {:.2} cores ({share:.0}% of the CPU used)",
                server / wall,
                generator / wall,
            ),
        )
    }
}

/// A CPU time per operation, given in seconds: `2.5 µs`, `85 µs`, `18.7 ms`.
fn per_op(seconds: f64) -> String {
    let micros = seconds * 1e6;
    if micros < 10.0 {
        format!("{micros:.1} µs")
    } else if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else {
        format!("{:.1} ms", micros / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_op_should_scale_its_unit() {
        assert_eq!(per_op(2.46e-6), "2.5 µs");
        assert_eq!(per_op(85.2e-6), "85 µs");
        assert_eq!(per_op(0.018_667), "18.7 ms");
    }

    #[test]
    fn stat_ticks_should_count_fields_after_the_last_parenthesis() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat_ticks(stat), Some(12));
        assert_eq!(parse_stat_ticks("42 (x) S 1"), None);
    }

    #[test]
    fn memory_should_read_rss_and_its_peak_in_bytes() {
        let status = "Name:\tsetpoint\nVmPeak:\t 9999 kB\nVmHWM:\t 2048 kB\nVmRSS:\t   1234 kB\n";
        assert_eq!(
            parse_memory(status),
            Some(Memory {
                rss: 1234 * 1024,
                peak: 2048 * 1024
            })
        );
        assert_eq!(parse_memory("VmRSS:\t 1 kB\n"), None);
    }

    #[test]
    fn this_process_should_have_a_cpu_time_and_rss() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(cpu_time(None).is_ok());
            assert!(rss_bytes(std::process::id()).expect("rss") > 0);
            let memory = memory(std::process::id()).expect("memory");
            assert!(memory.peak >= memory.rss, "{memory:?}");
        }
    }
}
