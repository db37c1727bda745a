//! Container runs as processes: the records on disk, starting a run through the shim,
//! waiting for it to end, and finding runs an earlier agent started (adoption).
//!
//! The pod directory is the source of truth about runs: the agent keeps no state of its own
//! that it could not rebuild from it after a restart (only crash-loop back-off timers and probe
//! results are in memory, and start over).

pub(crate) mod cgroup;
mod launch;
pub(crate) mod limits;
pub(crate) mod proc;
mod records;
pub(crate) mod tree;
mod watch;

pub(crate) use cgroup::CgroupParent;
pub(crate) use launch::{launch, Launched};
pub(crate) use proc::ProcessId;
pub(crate) use records::{
    now, read_json, recorded_runs, write_json, write_private, ExitRecord, RunAs, RunPaths,
    RunRecord, RunSpec, PRIVATE_FILE_MODE,
};
pub(crate) use watch::ShimWatch;

use std::path::Path;

/// The latest run of a container, as found on disk.
#[derive(Debug)]
pub(crate) enum FoundRun {
    /// Its shim still runs: adopted.
    Running(RunRecord, ShimWatch),
    /// It has ended (possibly found lost, and recorded so now).
    Exited(ExitRecord),
}

/// The latest run (`n`) of `container` in `pod_dir` and what became of it, with the exit
/// record of the run before it (`lastState`); `None` if the container never ran.
///
/// A run whose shim is gone without an exit record is recorded as lost: reason `Unknown`,
/// exit code 137, and what is left of it is killed ([`kill_lost_run`]).
pub(crate) fn find_latest_run(
    pod_dir: &Path,
    container: &str,
) -> Option<(u32, FoundRun, Option<ExitRecord>)> {
    let n = *recorded_runs(pod_dir, container).last()?;
    let previous = n
        .checked_sub(1)
        .and_then(|p| read_json(&RunPaths::new(pod_dir, container, p).exit_record).ok()?);
    let paths = RunPaths::new(pod_dir, container, n);
    if let Ok(Some(exit)) = read_json::<ExitRecord>(&paths.exit_record) {
        return Some((n, FoundRun::Exited(exit), previous));
    }
    let record = read_json::<RunRecord>(&paths.run_record).ok().flatten();
    if let Some(record) = &record {
        let shim = ProcessId {
            pid: record.shim_pid,
            start_time: record.shim_start_time,
        };
        if let Some(watch) = ShimWatch::adopt(shim) {
            return Some((n, FoundRun::Running(record.clone(), watch), previous));
        }
        // The shim may have written the record between our two reads.
        if let Ok(Some(exit)) = read_json::<ExitRecord>(&paths.exit_record) {
            return Some((n, FoundRun::Exited(exit), previous));
        }
        kill_lost_run(record);
    }
    let lost = ExitRecord {
        exit_code: 137,
        signal: None,
        reason: "Unknown".to_owned(),
        message: Some(match record {
            Some(_) => "the container's shim is gone without recording how the container ended (the node restarted, or the shim was killed); what was left of it was killed".to_owned(),
            None => "the run was interrupted while starting".to_owned(),
        }),
        started_at: record.map(|r| r.started_at),
        finished_at: now(),
    };
    if let Err(e) = write_json(&paths.exit_record, &lost) {
        tracing::warn!(path = %paths.exit_record.display(), error = %e, "recording a lost run");
    }
    Some((n, FoundRun::Exited(lost), previous))
}

/// Kills what is left of a run whose shim is gone: its cgroup, if it had one; else its
/// process group and the processes of its shim's session (a process that left both, in a
/// run without a cgroup, is beyond reach once its shim is gone).
pub(crate) fn kill_lost_run(record: &RunRecord) {
    let container = ProcessId {
        pid: record.container_pid,
        start_time: record.container_start_time,
    };
    let _ = container.signal_group(rustix::process::Signal::KILL);
    match &record.cgroup {
        Some(cgroup) => {
            if let Err(e) = cgroup::kill(&cgroup.dir, std::time::Duration::from_secs(5)) {
                tracing::warn!(error = %e, "killing what is left of a lost run");
            }
            let _ = cgroup::remove(&cgroup.dir);
        }
        None => {
            tree::kill_session(ProcessId {
                pid: record.shim_pid,
                start_time: record.shim_start_time,
            });
        }
    }
    limits::remove_lost(&record.limit_cgroups);
}

/// Sends SIGKILL to everything of a running container: its cgroup's processes (or, without
/// one, its process group). The shim notices its container's end and kills what remains.
pub(crate) fn kill_running(record: &RunRecord) {
    let container = ProcessId {
        pid: record.container_pid,
        start_time: record.container_start_time,
    };
    let _ = container.signal_group(rustix::process::Signal::KILL);
    if let Some(cgroup) = &record.cgroup {
        cgroup::signal_all(&cgroup.dir, rustix::process::Signal::KILL);
    }
}
