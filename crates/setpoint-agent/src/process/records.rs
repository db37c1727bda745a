//! The files that describe one container run on disk, shared by the agent and the shim.
//!
//! For run `n` (the container's `restartCount` while it runs) of container `c` of a pod whose
//! directory is `P`:
//! - `P/runs/c/n.spec.json` — [`RunSpec`]: what the shim must start (written by the agent,
//!   mode 0600: it holds the container's environment, which may hold secrets);
//! - `P/runs/c/n.run.json` — [`RunRecord`]: the shim's and the container's pids and `/proc`
//!   start times, and the container's cgroup if it has one (written by the shim, atomically,
//!   before it reports the start);
//! - `P/logs/c/n.log` — the container's output (the logs module's format);
//! - `P/logs/c/n.exit` — [`ExitRecord`]: how the run ended (written by the shim after the
//!   container exited and its output is drained, or by the agent for a run it found lost).
//!
//! Invariant: a run with an exit record is over; a run with a run record and no exit record is
//! running if and only if its shim is alive (same pid, same start time).

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use super::cgroup::RunCgroup;

/// What the shim starts: the resolved command line, environment and directories of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunSpec {
    /// The program (`command[0]`) and its arguments (rest of `command`, then `args`), with
    /// `$(VAR)` references expanded.
    pub(crate) argv: Vec<String>,
    /// The whole environment of the process, in order.
    pub(crate) env: Vec<(String, String)>,
    /// The working directory.
    pub(crate) working_dir: PathBuf,
    /// Where the container's output goes.
    pub(crate) log: PathBuf,
    /// Where the shim records the pids.
    pub(crate) run_record: PathBuf,
    /// Where the shim records the exit.
    pub(crate) exit_record: PathBuf,
    /// The cgroup to start the container in; without one (no usable cgroup file system, or
    /// `ContainerTracking::Subreaper`) the shim finds the container's processes as its
    /// descendants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cgroup: Option<RunCgroup>,
    /// The container's volume mounts (see `volumes/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) mounts: Vec<crate::volumes::MountSpec>,
    /// Whether the shim mounts them in a mount namespace of the container's own; otherwise
    /// they are only described in the environment.
    #[serde(default)]
    pub(crate) mount_namespace: bool,
    /// The pod's pinned network namespace, which the shim joins (`network/`); none: the
    /// host's network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) netns: Option<PathBuf>,
    /// The hostname of the UTS namespace the shim makes for the container; none: the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hostname: Option<String>,
    /// Resource limits and the cgroups that enforce them (see `process/limits.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) limits: Option<super::limits::RunLimits>,
    /// The user and group the container's process runs as (`securityContext.runAsUser`,
    /// `runAsGroup`); none: the shim's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_as: Option<RunAs>,
    /// The pod's PID namespace (`shareProcessNamespace`), which the shim joins
    /// (`shim/pid_namespace.rs`); none: the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pid_namespace: Option<crate::shim::pid_namespace::PidNamespace>,
    /// Attach settings: whether the shim keeps the container's stdin open (`shim/attach.rs`).
    #[serde(default)]
    pub(crate) attach: crate::shim::attach::AttachSpec,
}

/// The identity a container's process runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAs {
    /// Its user id.
    pub(crate) uid: u32,
    /// Its group id.
    pub(crate) gid: u32,
    /// Its supplementary groups (`supplementalGroups`, then `fsGroup`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) groups: Vec<u32>,
}

/// A started run: who supervises it and which process is the container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunRecord {
    /// The shim's pid.
    pub(crate) shim_pid: i32,
    /// The shim's start time in `/proc/<pid>/stat` (clock ticks since boot): with the pid, it
    /// names the process even after the pid is reused.
    pub(crate) shim_start_time: u64,
    /// The container's pid, also its process group id.
    pub(crate) container_pid: i32,
    /// The container's start time in `/proc/<pid>/stat`.
    pub(crate) container_start_time: u64,
    /// When the container started.
    pub(crate) started_at: Time,
    /// The cgroup the container was started in, if the shim could use one: everything the
    /// container started is in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cgroup: Option<RunCgroup>,
    /// The cgroups that limit and account the container's resources, if it has any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) limit_cgroups: Vec<super::limits::LimitCgroup>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExitRecord {
    /// The exit code; `128 + signal` when a signal ended the process (as container runtimes
    /// report it).
    pub(crate) exit_code: i32,
    /// The signal that ended the process, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) signal: Option<i32>,
    /// Why the run ended, for `state.terminated.reason`: `Completed`, `Error`, `OOMKilled`
    /// (its memory cgroup counted an OOM kill), `StartError`, or `Unknown` for a run found
    /// gone without a record.
    pub(crate) reason: String,
    /// Details, e.g. why the process could not be started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    /// When the container started, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<Time>,
    /// When it ended (or was found gone).
    pub(crate) finished_at: Time,
}

impl ExitRecord {
    /// The record of a process that ended with `exit_code` or was killed by `signal`.
    pub(crate) fn of_exit(
        exit_code: Option<i32>,
        signal: Option<i32>,
        started_at: Option<Time>,
    ) -> ExitRecord {
        let exit_code = match (exit_code, signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 255,
        };
        ExitRecord {
            exit_code,
            signal,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.to_owned(),
            message: None,
            started_at,
            finished_at: now(),
        }
    }
}

/// The paths of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunPaths {
    /// `P/runs/c/n.spec.json`.
    pub(crate) spec: PathBuf,
    /// `P/runs/c/n.run.json`.
    pub(crate) run_record: PathBuf,
    /// `P/logs/c/n.log`.
    pub(crate) log: PathBuf,
    /// `P/logs/c/n.exit`.
    pub(crate) exit_record: PathBuf,
}

impl RunPaths {
    /// The paths of run `n` of `container` in the pod directory `pod_dir`.
    pub(crate) fn new(pod_dir: &Path, container: &str, n: u32) -> RunPaths {
        let runs = runs_dir(pod_dir, container);
        let log = crate::logs::container_log(pod_dir, container, n);
        RunPaths {
            spec: runs.join(format!("{n}.spec.json")),
            run_record: runs.join(format!("{n}.run.json")),
            exit_record: crate::logs::exit_record(pod_dir, container, n),
            log,
        }
    }
}

/// `P/runs/c`: where a container's run records live.
pub(crate) fn runs_dir(pod_dir: &Path, container: &str) -> PathBuf {
    pod_dir.join("runs").join(container)
}

/// The run numbers recorded for `container`, ascending.
pub(crate) fn recorded_runs(pod_dir: &Path, container: &str) -> Vec<u32> {
    let mut runs: Vec<u32> = std::fs::read_dir(runs_dir(pod_dir, container))
        .map(|dir| {
            dir.filter_map(|entry| {
                let name = entry.ok()?.file_name();
                let name = name.to_str()?;
                name.strip_suffix(".spec.json")?.parse().ok()
            })
            .collect()
        })
        .unwrap_or_default();
    runs.sort_unstable();
    runs
}

/// Now, as an API timestamp (whole seconds are what the API keeps; we keep more).
pub(crate) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Reads a JSON record; `Ok(None)` if the file does not exist.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Mode of every file the agent writes: pod logs, records and specs are the pod's own.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;

/// Writes `bytes` to `path`, replacing it, readable by its owner only (`0600`), like every
/// file of the agent's own (not atomic: for small state files rewritten whole).
pub(crate) fn write_private(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    // An older file keeps its mode through `open`: tighten it.
    file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_FILE_MODE))?;
    file.write_all(bytes.as_ref())
}

/// Writes a JSON record atomically (a temporary file renamed over it), creating its directory;
/// like every file the agent writes, readable by its owner only (`0600`): records name the
/// pod's commands and environment.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_FILE_MODE)
        .open(&tmp)?;
    file.write_all(&bytes)?;
    file.sync_data()?;
    drop(file);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_record_should_report_a_signal_as_128_plus_it() {
        let record = ExitRecord::of_exit(None, Some(9), None);
        assert_eq!(record.exit_code, 137);
        assert_eq!(record.signal, Some(9));
        assert_eq!(record.reason, "Error");
        assert_eq!(ExitRecord::of_exit(Some(0), None, None).reason, "Completed");
    }

    #[test]
    fn records_should_round_trip_and_list_runs_in_order() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for n in [2, 0, 10] {
            let paths = RunPaths::new(dir.path(), "app", n);
            let spec = RunSpec {
                argv: vec!["true".into()],
                env: vec![("A".into(), "b".into())],
                working_dir: dir.path().to_owned(),
                log: paths.log.clone(),
                run_record: paths.run_record.clone(),
                exit_record: paths.exit_record.clone(),
                cgroup: None,
                mounts: Vec::new(),
                mount_namespace: false,
                netns: None,
                hostname: None,
                limits: None,
                run_as: None,
                attach: Default::default(),
                pid_namespace: None,
            };
            write_json(&paths.spec, &spec).expect("written");
            assert_eq!(read_json::<RunSpec>(&paths.spec).expect("read"), Some(spec));
        }
        assert_eq!(recorded_runs(dir.path(), "app"), vec![0, 2, 10]);
        assert_eq!(recorded_runs(dir.path(), "other"), Vec::<u32>::new());
        let missing = RunPaths::new(dir.path(), "app", 99).exit_record;
        assert_eq!(read_json::<ExitRecord>(&missing).expect("no error"), None);
    }
}
