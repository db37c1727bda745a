//! Container log files, in the format container runtimes write for the kubelet, and their
//! reading for `kubectl logs`.
//!
//! Layout (all under the agent's root directory):
//! `ROOT/pods/<namespace>_<name>_<uid>/logs/<container>/<n>.log` is run `n` of a container
//! (0 for its first start, one more for each restart); `<n>.exit` beside it is the run's exit
//! record, written by the shim after the container exited and its output was drained. The
//! current run is the highest `n`; the previous one is the next lower `n` present.
//!
//! Each line of a log file is `<RFC3339Nano UTC> <stdout|stderr> <F|P> <text>`: `F` ends a line
//! of the container's output, `P` is a piece of a longer (or unterminated) line whose next
//! piece follows on a later `P`/`F` line of the same stream. [`LogWriter`] writes it;
//! [`read_logs`] serves it with the kubelet's options ([`LogOptions`]).

#[cfg(test)]
mod read_tests;

mod options;
mod read;
mod record;
mod writer;

use std::path::{Path, PathBuf};

pub(crate) use read::{read_logs, LogError, LogOptions};
pub(crate) use writer::{LogStream, LogWriter};

/// `ROOT/pods/<namespace>_<name>_<uid>`: the directory of one pod (its containers' logs, run
/// records and working directories). Namespaces, names and UIDs never contain `_`.
pub(crate) fn pod_dir(root: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    root.join("pods").join(format!("{namespace}_{name}_{uid}"))
}

/// `POD_DIR/logs/<container>`: where the runs of one container keep their logs.
pub(crate) fn container_log_dir(pod_dir: &Path, container: &str) -> PathBuf {
    pod_dir.join("logs").join(container)
}

/// `POD_DIR/logs/<container>/<restart_count>.log`: the log of one run of a container.
pub(crate) fn container_log(pod_dir: &Path, container: &str, restart_count: u32) -> PathBuf {
    container_log_dir(pod_dir, container).join(format!("{restart_count}.log"))
}

/// `POD_DIR/logs/<container>/<restart_count>.exit`: the run's exit record, present once the
/// run is over and its log complete.
pub(crate) fn exit_record(pod_dir: &Path, container: &str, restart_count: u32) -> PathBuf {
    container_log_dir(pod_dir, container).join(format!("{restart_count}.exit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_should_follow_the_documented_layout() {
        let pod = pod_dir(Path::new("/r"), "ns", "web", "u-1");
        assert_eq!(pod, Path::new("/r/pods/ns_web_u-1"));
        assert_eq!(
            container_log(&pod, "app", 3),
            Path::new("/r/pods/ns_web_u-1/logs/app/3.log")
        );
        assert_eq!(
            exit_record(&pod, "app", 3),
            Path::new("/r/pods/ns_web_u-1/logs/app/3.exit")
        );
    }
}
