//! Stopping every pod process of an agent root directory with no agent running (`setpoint
//! agent cleanup`): stopping the agent leaves its containers running by design (the next agent
//! adopts them), so before a root directory is thrown away this stops what runs from it.
//!
//! What is found: from the pod directories, each container's latest run that has a run
//! record and no exit record (its shim and container pids, its cgroup); and from the cgroup
//! file system, every cgroup under this root's `setpoint/<root id>` in any hierarchy — which
//! finds a container's processes even when the root directory itself is already gone.
//!
//! How it stops them, as a pod deletion does: SIGTERM to each running container's process
//! group, up to `grace` for the shims to record the exits, then SIGKILL to what is left
//! (container, cgroup, shim); then SIGKILL to every process still in one of the root's
//! cgroups, and the cgroups are removed. The agent's nftables table (Service rules), if it
//! left one, is deleted.

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::process::Signal;

// Any directory's subdirectories, sorted (cgroups are directories too).
use crate::process::cgroup::children as subdirs;
use crate::process::{cgroup, kill_lost_run, kill_running, read_json, recorded_runs};
use crate::process::{ProcessId, RunPaths, RunRecord};

/// How long shims get to record their containers' exits after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How often the cleanup looks at what still runs.
const POLL: Duration = Duration::from_millis(100);

/// What [`cleanup`] stopped, one line each (`default/web container app (pid 1234): …`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanupReport {
    /// One line per container run or cgroup stopped, saying what and how.
    pub stopped: Vec<String>,
}

/// A container run found running (or lost) under the root.
struct Found {
    /// `namespace/name container c (pid p)`, for the report.
    label: String,
    record: RunRecord,
    shim: ProcessId,
}

/// Stops every pod process of the agent root `root_dir` (for `setpoint server`, the data
/// directory's `agent`): SIGTERM, `grace`, SIGKILL. Blocks until done. Never fails: what
/// cannot be read is skipped, what cannot be signalled is reported.
pub fn cleanup(root_dir: &Path, grace: Duration) -> CleanupReport {
    let mut report = CleanupReport::default();
    let (running, lost) = found_runs(root_dir);
    for run in &lost {
        let container = ProcessId {
            pid: run.record.container_pid,
            start_time: run.record.container_start_time,
        };
        let in_cgroup = run
            .record
            .cgroup
            .as_ref()
            .is_some_and(|cg| !cgroup::procs(&cg.dir).is_empty());
        if container.is_alive() || in_cgroup {
            kill_lost_run(&run.record);
            report.stopped.push(format!(
                "{}: its shim was gone; killed what was left",
                run.label
            ));
        }
    }
    for run in &running {
        let container = ProcessId {
            pid: run.record.container_pid,
            start_time: run.record.container_start_time,
        };
        let _ = container.signal_group(Signal::TERM);
    }
    let deadline = Instant::now() + grace;
    while running.iter().any(|r| r.shim.is_alive()) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let mut killed = Vec::new();
    for run in &running {
        if run.shim.is_alive() {
            kill_running(&run.record);
            killed.push(run);
        } else {
            report
                .stopped
                .push(format!("{}: exited after SIGTERM", run.label));
        }
    }
    let deadline = Instant::now() + KILL_WAIT;
    while killed.iter().any(|r| r.shim.is_alive()) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    for run in killed {
        if run.shim.is_alive() {
            if let Some(pid) = rustix::process::Pid::from_raw(run.shim.pid) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
            kill_lost_run(&run.record);
        }
        report.stopped.push(format!(
            "{}: killed (SIGKILL) after the {} s grace period",
            run.label,
            grace.as_secs()
        ));
    }
    // The PID namespaces of pods sharing one (their inits) go with the pods.
    report
        .stopped
        .extend(crate::shim::pid_namespace::stop_recorded(
            &root_dir.join("pods"),
        ));
    // What no record or cgroup led to: a shim killed while it was still starting its container
    // (the server died mid-start) may have forked it already.
    report.stopped.extend(kill_stragglers(root_dir));
    // The pod network (bridge, namespaces, addresses) goes with the pods.
    crate::network::remove_all(root_dir);
    let limit_parents = crate::process::limits::existing_parents(root_dir);
    for parent in cgroup::existing_parents(root_dir)
        .into_iter()
        .chain(limit_parents)
    {
        for dir in cgroup::children(&parent) {
            match cgroup::kill(&dir, KILL_WAIT) {
                Ok(0) => {}
                Ok(n) => report.stopped.push(format!(
                    "cgroup {}: killed {n} process(es) left in it",
                    dir.display()
                )),
                Err(e) => report
                    .stopped
                    .push(format!("cgroup {}: {e}", dir.display())),
            }
            if let Err(e) = cgroup::remove(&dir) {
                report
                    .stopped
                    .push(format!("cgroup {}: not removed: {e}", dir.display()));
            }
        }
        let _ = cgroup::remove(&parent);
    }
    // The Service rules a killed agent left (not a process: logged, not reported).
    if let Some(done) = crate::proxy::cleanup_table(root_dir) {
        tracing::info!("{done}");
    }
    report
}

/// SIGKILLs, until none is left (or [`KILL_WAIT`] passes), every process of `root_dir`'s pods
/// still alive: shims naming the root in their command line, and container processes (their
/// environment has the agent's `SETPOINT_MOUNT_MODE`) working in, or pointed by their
/// environment at, its `pods` directory. Returns a line per process killed.
fn kill_stragglers(root_dir: &Path) -> Vec<String> {
    let mut stopped = Vec::new();
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        let found = stragglers(root_dir);
        if found.is_empty() || Instant::now() > deadline {
            return stopped;
        }
        for (pid, what) in found {
            if let Some(p) = rustix::process::Pid::from_raw(pid) {
                if rustix::process::kill_process(p, Signal::KILL).is_ok() {
                    stopped.push(format!(
                        "{what} (pid {pid}): killed (SIGKILL), left running"
                    ));
                }
            }
        }
        std::thread::sleep(POLL);
    }
}

/// The live processes [`kill_stragglers`] looks for, with what each is.
fn stragglers(root_dir: &Path) -> Vec<(i32, &'static str)> {
    use crate::process::proc::{all_pids, contains, is_shim_of};
    let pods = root_dir.join("pods");
    let me = i32::try_from(std::process::id()).unwrap_or_default();
    let mut found = Vec::new();
    for pid in all_pids().into_iter().filter(|p| *p != me) {
        if is_shim_of(pid, root_dir) {
            found.push((pid, "shim"));
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let in_pods = std::fs::read_link(format!("/proc/{pid}/cwd"))
            .is_ok_and(|cwd| cwd.starts_with(&pods))
            || contains(&environ, pods.as_os_str().as_encoded_bytes());
        if in_pods && contains(&environ, b"SETPOINT_MOUNT_MODE=") {
            found.push((pid, "container process"));
        }
    }
    found
}

/// The runs under `root_dir` without an exit record: those whose shim is alive, and those
/// whose shim is gone (lost) but that had started.
fn found_runs(root_dir: &Path) -> (Vec<Found>, Vec<Found>) {
    let (mut running, mut lost) = (Vec::new(), Vec::new());
    for pod_dir in subdirs(&root_dir.join("pods")) {
        let pod = pod_label(&pod_dir);
        for container_dir in subdirs(&pod_dir.join("runs")) {
            let Some(container) = container_dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(n) = recorded_runs(&pod_dir, container).last().copied() else {
                continue;
            };
            let paths = RunPaths::new(&pod_dir, container, n);
            if paths.exit_record.exists() {
                continue;
            }
            let Ok(Some(record)) = read_json::<RunRecord>(&paths.run_record) else {
                continue;
            };
            let shim = ProcessId {
                pid: record.shim_pid,
                start_time: record.shim_start_time,
            };
            let found = Found {
                label: format!("{pod} container {container} (pid {})", record.container_pid),
                record,
                shim,
            };
            if shim.is_alive() {
                running.push(found);
            } else {
                lost.push(found);
            }
        }
    }
    (running, lost)
}

/// `namespace/name` of a pod directory (its `pod.json`, else its name).
fn pod_label(pod_dir: &Path) -> String {
    let identity = read_json::<serde_json::Value>(&pod_dir.join("pod.json"))
        .ok()
        .flatten();
    match identity {
        Some(id) if id["name"].is_string() => format!(
            "{}/{}",
            id["namespace"].as_str().unwrap_or_default(),
            id["name"].as_str().unwrap_or_default()
        ),
        _ => pod_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    #[test]
    fn a_container_process_no_record_led_to_should_be_killed_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("pods/default_p_uid/work");
        std::fs::create_dir_all(&work).unwrap();
        let spawn = |mode: Option<&str>| {
            let mut c = Command::new("sleep");
            c.arg("30").current_dir(&work);
            if let Some(mode) = mode {
                c.env("SETPOINT_MOUNT_MODE", mode);
            }
            c.spawn().unwrap()
        };
        let mut container = spawn(Some("emulated"));
        // Not the agent's: a user's process that merely sits in the directory.
        let mut bystander = spawn(None);

        let report = cleanup(root.path(), Duration::ZERO);

        let status = container.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{report:?}");
        let pid = container.id();
        assert!(
            report
                .stopped
                .iter()
                .any(|l| l.contains(&format!("(pid {pid})"))),
            "{report:?}"
        );
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "the bystander was killed"
        );
        bystander.kill().unwrap();
        bystander.wait().unwrap();
    }
}
