//! The containers running on this node, found from the pod directories (the source of truth
//! about runs, see the `process` module): for each pod directory
//! `ROOT/pods/<namespace>_<name>_<uid>`, each container's latest run that has a run record,
//! no exit record, and a live shim.

use std::path::Path;

use crate::process::{read_json, recorded_runs, ProcessId, RunPaths, RunRecord};

/// Which pod a container belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PodKey {
    /// The pod's namespace.
    pub(crate) namespace: String,
    /// Its name.
    pub(crate) name: String,
    /// Its UID.
    pub(crate) uid: String,
}

/// A container with a running process.
#[derive(Debug, Clone)]
pub(crate) struct RunningContainer {
    /// Its pod.
    pub(crate) pod: PodKey,
    /// Its name.
    pub(crate) name: String,
    /// Its run number (restart count): a new run is a new container for the sampler.
    pub(crate) run: u32,
    /// Its shim: the container's processes are the others of the session the shim leads.
    pub(crate) shim: ProcessId,
    /// When the run started.
    pub(crate) started_at: chrono::DateTime<chrono::Utc>,
    /// Its limit cgroups, which account its CPU and memory (if it has any).
    pub(crate) limit_cgroups: Vec<crate::process::limits::LimitCgroup>,
}

/// Every container running under `root` (the agent's root directory), in pod and container
/// order. Unreadable directories and records are skipped.
pub(crate) fn running_containers(root: &Path) -> Vec<RunningContainer> {
    let mut found = Vec::new();
    let Ok(pods) = std::fs::read_dir(root.join("pods")) else {
        return found;
    };
    for entry in pods.flatten() {
        let file_name = entry.file_name();
        let Some(pod) = file_name.to_str().and_then(parse_pod_dir_name) else {
            continue;
        };
        let pod_dir = entry.path();
        let Ok(containers) = std::fs::read_dir(pod_dir.join("runs")) else {
            continue;
        };
        for container in containers.flatten() {
            let Some(name) = container.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if let Some(running) = running_run(&pod_dir, &pod, &name) {
                found.push(running);
            }
        }
    }
    found.sort_by(|a, b| (&a.pod, &a.name).cmp(&(&b.pod, &b.name)));
    found
}

/// The latest run of `container` if it is running.
fn running_run(pod_dir: &Path, pod: &PodKey, container: &str) -> Option<RunningContainer> {
    let run = *recorded_runs(pod_dir, container).last()?;
    let paths = RunPaths::new(pod_dir, container, run);
    if paths.exit_record.exists() {
        return None;
    }
    let record: RunRecord = read_json(&paths.run_record).ok()??;
    let shim = ProcessId {
        pid: record.shim_pid,
        start_time: record.shim_start_time,
    };
    if !shim.is_alive() {
        return None;
    }
    let started = record.started_at.0;
    let started_at = chrono::DateTime::from_timestamp(
        started.as_second(),
        u32::try_from(started.subsec_nanosecond()).unwrap_or(0),
    )
    .unwrap_or_default();
    Some(RunningContainer {
        pod: pod.clone(),
        name: container.to_owned(),
        run,
        shim,
        started_at,
        limit_cgroups: record.limit_cgroups,
    })
}

/// `<namespace>_<name>_<uid>` (none of which holds `_`).
fn parse_pod_dir_name(name: &str) -> Option<PodKey> {
    let mut parts = name.split('_');
    let (namespace, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || namespace.is_empty() || pod.is_empty() || uid.is_empty() {
        return None;
    }
    Some(PodKey {
        namespace: namespace.to_owned(),
        name: pod.to_owned(),
        uid: uid.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_dir_names_should_split_into_namespace_name_and_uid() {
        assert_eq!(
            parse_pod_dir_name("default_web-1_0a1b"),
            Some(PodKey {
                namespace: "default".into(),
                name: "web-1".into(),
                uid: "0a1b".into(),
            })
        );
        assert_eq!(parse_pod_dir_name("default_web"), None);
        assert_eq!(parse_pod_dir_name("a_b_c_d"), None);
        assert_eq!(parse_pod_dir_name("_b_c"), None);
    }

    #[test]
    fn a_run_with_a_live_shim_and_no_exit_record_should_be_running() {
        let root = tempfile::tempdir().expect("tempdir");
        let pod_dir = crate::logs::pod_dir(root.path(), "ns", "p", "u1");
        let me = ProcessId::current(std::process::id() as i32).expect("this process");
        let record = RunRecord {
            shim_pid: me.pid,
            shim_start_time: me.start_time,
            container_pid: me.pid,
            container_start_time: me.start_time,
            started_at: crate::process::now(),
            cgroup: None,
            limit_cgroups: Vec::new(),
        };
        for (container, shim_alive) in [("live", true), ("gone", false)] {
            let paths = RunPaths::new(&pod_dir, container, 0);
            let spec_dir = paths.spec.parent().expect("runs dir");
            std::fs::create_dir_all(spec_dir).expect("mkdir");
            std::fs::write(&paths.spec, "{}").expect("spec");
            let mut record = record.clone();
            if !shim_alive {
                record.shim_start_time += 1;
            }
            crate::process::write_json(&paths.run_record, &record).expect("record");
        }
        let running = running_containers(root.path());
        assert_eq!(running.len(), 1, "{running:?}");
        assert_eq!(running[0].name, "live");
        assert_eq!(running[0].pod.uid, "u1");
        assert_eq!(running[0].shim, me);
    }
}
