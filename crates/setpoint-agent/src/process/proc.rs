//! Processes named safely: a pid together with its `/proc` start time, so that a pid the
//! kernel has since given to another process is never signalled or mistaken for ours.

use std::io;

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
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (state, start_time) = parse_stat(&stat)?;
        (state != 'Z' && state != 'X').then_some(ProcessId { pid, start_time })
    }

    /// The process `pid`, even if it has exited and is not yet reaped (a zombie keeps its
    /// start time): what a parent reads of the child it just started.
    pub(crate) fn of_child(pid: i32) -> Option<ProcessId> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, start_time) = parse_stat(&stat)?;
        Some(ProcessId { pid, start_time })
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

/// The state letter and start time in the text of `/proc/<pid>/stat`. The command name (field
/// 2) may hold spaces and parentheses: fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `rest` starts at field 3 (state); the start time is field 22.
    let start_time = fields.nth(18)?.parse().ok()?;
    Some((state, start_time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_should_count_fields_after_the_command_name() {
        let stat = "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615";
        assert_eq!(parse_stat(stat), Some(('S', 98765)));
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
