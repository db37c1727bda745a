//! Finding the container a stream request names, from what is on disk: the pod's directory
//! (namespace, name and uid), the container's latest run, and whether it is running (a run
//! record, no exit record, a live container process).

use std::path::{Path, PathBuf};

use setpoint_core::{ApiError, Reason};

use crate::process::{read_json, recorded_runs, ExitRecord, ProcessId, RunPaths, RunRecord};

/// A running container: its process and how it was started.
#[derive(Debug, Clone)]
pub(crate) struct RunningContainer {
    /// Its main process.
    pub(crate) pid: i32,
    /// The run's spec file (the exec helper reads the environment, working directory and
    /// cgroup from it).
    pub(crate) spec_path: PathBuf,
    /// The run's paths.
    pub(crate) paths: RunPaths,
}

/// The pod directory `pod_dir` of pod `pod`, or a 404 `Status` if the pod is not on this node.
pub(crate) fn existing_pod_dir(pod_dir: &Path, pod: &str) -> Result<(), ApiError> {
    if pod_dir.is_dir() {
        Ok(())
    } else {
        Err(ApiError::new(
            Reason::NotFound,
            format!("pod {pod:?} not found on this node"),
        ))
    }
}

/// The running container `container` of the pod in `pod_dir`: 404 `NotFound` if it never ran
/// here, 400 `BadRequest` if its latest run is over (kube's `container not found ("c")`).
pub(crate) fn running_container(
    pod_dir: &Path,
    pod: &str,
    container: &str,
) -> Result<RunningContainer, ApiError> {
    existing_pod_dir(pod_dir, pod)?;
    let Some(&n) = recorded_runs(pod_dir, container).last() else {
        return Err(ApiError::new(
            Reason::NotFound,
            format!("container {container} is not valid for pod {pod}"),
        ));
    };
    let not_running = || ApiError::bad_request(format!("container not found ({container:?})"));
    let paths = RunPaths::new(pod_dir, container, n);
    if matches!(read_json::<ExitRecord>(&paths.exit_record), Ok(Some(_))) {
        return Err(not_running());
    }
    let record = match read_json::<RunRecord>(&paths.run_record) {
        Ok(Some(record)) => record,
        _ => return Err(not_running()),
    };
    let process = ProcessId {
        pid: record.container_pid,
        start_time: record.container_start_time,
    };
    if !process.is_alive() {
        return Err(not_running());
    }
    if !paths.spec.exists() {
        return Err(not_running());
    }
    Ok(RunningContainer {
        pid: record.container_pid,
        spec_path: paths.spec.clone(),
        paths,
    })
}

/// Any running container of the pod in `pod_dir` (the first by name), for port-forwarding:
/// all of a pod's containers share its network.
pub(crate) fn any_running_container(
    pod_dir: &Path,
    pod: &str,
) -> Result<RunningContainer, ApiError> {
    existing_pod_dir(pod_dir, pod)?;
    let mut names: Vec<String> = std::fs::read_dir(pod_dir.join("runs"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .iter()
        .find_map(|name| running_container(pod_dir, pod, name).ok())
        .ok_or_else(|| ApiError::bad_request(format!("pod {pod} has no running container")))
}
