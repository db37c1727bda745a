//! Finding a container's processes without cgroups: through the process tree (the shim is a
//! child subreaper, so everything the container started stays its descendant, whatever its
//! session) and through the shim's session (for a run whose shim is gone).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

use super::proc::{all_pids, ProcessId, Stat};

/// How often a kill checks what is left.
const POLL: Duration = Duration::from_millis(10);

/// Makes this process a child subreaper: its descendants whose parents exit are reparented
/// to it (not to init), so they stay its descendants.
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    let me = Pid::from_raw(std::process::id() as i32);
    rustix::process::set_child_subreaper(me).map_err(Into::into)
}

/// The live (not exited) descendants of process `ancestor`, by parent links in `/proc`.
pub(crate) fn descendants(ancestor: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let mut live = HashSet::new();
    for pid in all_pids() {
        if let Some(stat) = Stat::of(pid) {
            children.entry(stat.ppid).or_default().push(pid);
            if !stat.exited() {
                live.insert(pid);
            }
        }
    }
    let mut found = Vec::new();
    let mut next = vec![ancestor];
    while let Some(parent) = next.pop() {
        for child in children.get(&parent).into_iter().flatten() {
            if *child != ancestor && !found.contains(child) {
                found.push(*child);
                next.push(*child);
            }
        }
    }
    found.retain(|pid| live.contains(pid));
    found
}

/// SIGKILLs every descendant of this process, reaping those that are its children, until
/// none is left or `wait` has passed; returns how many there were at first.
pub(crate) fn kill_descendants(wait: Duration) -> usize {
    let me = std::process::id() as i32;
    let deadline = Instant::now() + wait;
    let first = descendants(me).len();
    loop {
        reap_children();
        let left = descendants(me);
        if left.is_empty() || Instant::now() > deadline {
            return first;
        }
        for pid in left {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Reaps every child of this process that has exited, without waiting.
pub(crate) fn reap_children() {
    while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
}

/// SIGKILLs the processes of the session `shim` led (a container's processes that kept its
/// shim's session), when the shim is gone and its pid not reused; returns how many.
pub(crate) fn kill_session(shim: ProcessId) -> usize {
    if ProcessId::current(shim.pid).is_some_and(|now| now.start_time != shim.start_time) {
        // The pid (and with it the session id) may belong to someone else now.
        return 0;
    }
    let mut killed = 0;
    for pid in all_pids() {
        let ours = pid != shim.pid
            && Stat::of(pid).is_some_and(|s| {
                s.session == shim.pid && s.start_time >= shim.start_time && !s.exited()
            });
        if let (true, Some(pid)) = (ours, Pid::from_raw(pid)) {
            if rustix::process::kill_process(pid, Signal::KILL).is_ok() {
                killed += 1;
            }
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_should_include_children_and_grandchildren() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .expect("sh");
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        let grandchildren = loop {
            let grandchildren = descendants(pid);
            if !grandchildren.is_empty() || Instant::now() > deadline {
                break grandchildren;
            }
            std::thread::sleep(POLL);
        };
        let found = descendants(std::process::id() as i32);
        let _ = child.kill();
        for g in &grandchildren {
            if let Some(g) = Pid::from_raw(*g) {
                let _ = rustix::process::kill_process(g, Signal::KILL);
            }
        }
        let _ = child.wait();
        assert!(found.contains(&pid), "{found:?}");
        assert_eq!(grandchildren.len(), 1, "{grandchildren:?}");
        assert!(found.contains(&grandchildren[0]), "{found:?}");
    }
}
