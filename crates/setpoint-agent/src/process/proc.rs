//! Processes named safely: a pid together with its `/proc` start time, so that a pid the
//! kernel has since given to another process is never signalled or mistaken for ours.

use std::io;
use std::path::Path;

use rustix::process::{Pid, Signal};

/// A process as the agent knows it: its pid and its start time (clock ticks since boot,
/// field 22 of `/proc/<pid>/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessId {
    /// The pid.
    pub(crate) pid: i32,
    /// Its start time.
    pub(crate) start_time: u64,
}

impl ProcessId {
    /// The process `pid` as it is now; `None` if there is none (or it is a zombie: it has
    /// exited already).
    pub(crate) fn current(pid: i32) -> Option<ProcessId> {
        let stat = Stat::of(pid)?;
        (!stat.exited()).then_some(ProcessId {
            pid,
            start_time: stat.start_time,
        })
    }

    /// The process `pid`, even if it has exited and is not yet reaped (a zombie keeps its
    /// start time): what a parent reads of the child it just started.
    pub(crate) fn of_child(pid: i32) -> Option<ProcessId> {
        let stat = Stat::of(pid)?;
        Some(ProcessId {
            pid,
            start_time: stat.start_time,
        })
    }

    /// Whether this very process is still running.
    pub(crate) fn is_alive(&self) -> bool {
        ProcessId::current(self.pid).is_some_and(|now| now.start_time == self.start_time)
    }

    /// Sends `signal` to the process group this process leads (a container's process and
    /// everything it started without leaving the group), if the process is still the one we
    /// started. `Ok(false)` if it is gone.
    pub(crate) fn signal_group(&self, signal: Signal) -> io::Result<bool> {
        let Some(pid) = Pid::from_raw(self.pid) else {
            return Ok(false);
        };
        // The group outlives its leader when children remain: still ours if the leader's pid
        // has not been reused (then no process can lead a group with that id but ours).
        let leader_reused =
            ProcessId::current(self.pid).is_some_and(|now| now.start_time != self.start_time);
        if leader_reused {
            return Ok(false);
        }
        match rustix::process::kill_process_group(pid, signal) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::SRCH) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// What the agent reads of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// The state letter (`R`, `S`, `Z`, …).
    pub(crate) state: char,
    /// The parent's pid (field 4).
    pub(crate) ppid: i32,
    /// The session id (field 6).
    pub(crate) session: i32,
    /// The start time (field 22).
    pub(crate) start_time: u64,
}

impl Stat {
    /// The stat of process `pid`; `None` if there is none.
    pub(crate) fn of(pid: i32) -> Option<Stat> {
        parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Whether the process has exited (a zombie, or dead).
    pub(crate) fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Every process's pid, as `/proc` lists them now.
pub(crate) fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid` is a shim (`agent-shim`) of the agent rooted at `root`: one naming the root in
/// its command line.
pub(crate) fn is_shim_of(pid: i32, root: &Path) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    contains(&cmdline, b"agent-shim") && contains(&cmdline, root.as_os_str().as_encoded_bytes())
}

/// Whether `needle` occurs in `haystack`.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The text of `/proc/<pid>/stat`, parsed. The command name (field 2) may hold spaces and
/// parentheses: fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state).
    let field = |n: usize| fields.get(n - 3).copied();
    Some(Stat {
        state: field(3)?.chars().next()?,
        ppid: field(4)?.parse().ok()?,
        session: field(6)?.parse().ok()?,
        start_time: field(22)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_should_count_fields_after_the_command_name() {
        let stat = "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615";
        assert_eq!(
            parse_stat(stat),
            Some(Stat {
                state: 'S',
                ppid: 1,
                session: 1234,
                start_time: 98765
            })
        );
    }

    #[test]
    fn current_process_should_be_alive_and_a_changed_start_time_should_not() {
        let me = ProcessId::current(std::process::id() as i32).expect("this process");
        assert!(me.is_alive());
        let other = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!other.is_alive());
        assert!(ProcessId::current(i32::MAX).is_none());
    }
}
