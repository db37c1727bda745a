//! What the sampler reads from `/proc`: every process's CPU time, resident memory and session
//! (`/proc/<pid>/stat`), the machine's CPU time (`/proc/stat`) and memory (`/proc/meminfo`).
//!
//! Parsers take the files' text and return `None` on text they do not understand (a process
//! that exited mid-read, a kernel with another layout), never panic.

use std::collections::HashMap;
use std::path::Path;

/// One process, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessStat {
    /// Its pid (field 1).
    pub(crate) pid: i32,
    /// Its session id (field 6): a container's processes are in the session its shim leads.
    pub(crate) session: i32,
    /// CPU time in clock ticks: its own (`utime` + `stime`, fields 14–15) and that of its
    /// children it has waited for (`cutime` + `cstime`, fields 16–17).
    pub(crate) cpu_ticks: u64,
    /// Resident set size in pages (field 24).
    pub(crate) rss_pages: u64,
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) may hold spaces and
/// parentheses: fields are counted after its last `)`.
pub(crate) fn parse_process_stat(stat: &str) -> Option<ProcessStat> {
    let open = stat.find('(')?;
    let pid = stat[..open].trim().parse().ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // `fields[0]` is field 3 (state).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let unsigned = |n: usize| field(n)?.parse::<u64>().ok();
    // cutime and cstime are signed in the kernel's format.
    let signed = |n: usize| {
        field(n)?
            .parse::<i64>()
            .ok()
            .map(|v| u64::try_from(v).unwrap_or(0))
    };
    let session = field(6)?.parse().ok()?;
    let cpu_ticks = unsigned(14)?
        .saturating_add(unsigned(15)?)
        .saturating_add(signed(16)?)
        .saturating_add(signed(17)?);
    let rss_pages = signed(24)?;
    Some(ProcessStat {
        pid,
        session,
        cpu_ticks,
        rss_pages,
    })
}

/// Every process now, grouped by session id. Processes that exit while being read are left
/// out.
pub(crate) fn processes_by_session(proc_root: &Path) -> HashMap<i32, Vec<ProcessStat>> {
    let mut sessions: HashMap<i32, Vec<ProcessStat>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return sessions;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) else {
            continue;
        };
        if let Some(stat) = parse_process_stat(&text) {
            sessions.entry(stat.session).or_default().push(stat);
        }
    }
    sessions
}

/// The machine's CPU time in clock ticks from the first line of `/proc/stat`: busy time
/// (user, nice, system, irq, softirq, steal; guest time is already in user and nice) and all
/// time (busy plus idle and iowait).
pub(crate) fn parse_machine_cpu(stat: &str) -> Option<MachineCpu> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| values.get(i).copied().unwrap_or(0);
    if values.len() < 4 {
        return None;
    }
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some(MachineCpu {
        busy_ticks: busy,
        total_ticks: busy + at(3) + at(4),
    })
}

/// The machine's CPU time, from `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MachineCpu {
    /// Ticks spent busy, summed over CPUs.
    pub(crate) busy_ticks: u64,
    /// All ticks, summed over CPUs.
    pub(crate) total_ticks: u64,
}

/// The machine's memory working set in bytes from `/proc/meminfo`: `MemTotal − MemAvailable`
/// (memory the kernel could not hand out without swapping or dropping dirty or active pages).
pub(crate) fn parse_machine_memory(meminfo: &str) -> Option<u64> {
    let kib = |key: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(key))?;
        line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    };
    let total = kib("MemTotal:")?;
    let available = kib("MemAvailable:")?;
    Some(total.saturating_sub(available) * 1024)
}

/// Clock ticks per second and bytes per page, to turn `/proc` figures into nanoseconds and
/// bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Units {
    /// `sysconf(_SC_CLK_TCK)`.
    pub(crate) ticks_per_second: u64,
    /// `sysconf(_SC_PAGESIZE)`.
    pub(crate) page_size: u64,
}

impl Units {
    /// This machine's.
    pub(crate) fn of_this_machine() -> Units {
        Units {
            ticks_per_second: rustix::param::clock_ticks_per_second().max(1),
            page_size: rustix::param::page_size() as u64,
        }
    }

    /// `ticks` in nanoseconds.
    pub(crate) fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(self.ticks_per_second);
        u64::try_from(nanos).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_stat_should_read_session_cpu_and_rss_after_an_odd_command_name() {
        // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime vsize
        // rss …
        let stat = "4242 (a (weird) name) R 1 4242 4200 0 -1 4194560 100 0 0 0 150 50 7 3 20 0 1 0 98765 1000000 321 18446744073709551615";
        assert_eq!(
            parse_process_stat(stat),
            Some(ProcessStat {
                pid: 4242,
                session: 4200,
                cpu_ticks: 210,
                rss_pages: 321,
            })
        );
    }

    #[test]
    fn process_stat_should_refuse_truncated_text() {
        assert_eq!(parse_process_stat("12 (sh) S 1 12 12 0"), None);
        assert_eq!(parse_process_stat("garbage"), None);
        assert_eq!(parse_process_stat(""), None);
    }

    #[test]
    fn this_process_should_appear_in_its_session_with_memory() {
        let me = std::process::id() as i32;
        let sessions = processes_by_session(Path::new("/proc"));
        let found = sessions
            .values()
            .flatten()
            .find(|p| p.pid == me)
            .expect("this process in /proc");
        assert!(found.rss_pages > 0);
    }

    #[test]
    fn machine_cpu_should_sum_busy_and_idle_ticks() {
        let stat = "cpu  100 10 50 1000 20 5 5 2 0 0\ncpu0 50 5 25 500 10 2 3 1 0 0\nintr 1 2 3\n";
        assert_eq!(
            parse_machine_cpu(stat),
            Some(MachineCpu {
                busy_ticks: 172,
                total_ticks: 1192,
            })
        );
        assert_eq!(parse_machine_cpu("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_machine_cpu("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn machine_memory_should_be_total_minus_available() {
        let meminfo = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    12000000 kB\n";
        assert_eq!(parse_machine_memory(meminfo), Some(4_000_000 * 1024));
        assert_eq!(parse_machine_memory("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn ticks_should_convert_to_nanoseconds() {
        let units = Units {
            ticks_per_second: 100,
            page_size: 4096,
        };
        assert_eq!(units.ticks_to_nanos(250), 2_500_000_000);
    }
}
