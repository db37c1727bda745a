//! Starting a container run: the spec on disk, the shim started, its report read.

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt as _;
use tokio::process::Command;

use super::records::{read_json, write_json, ExitRecord, RunPaths, RunRecord, RunSpec};
use super::watch::ShimWatch;
use crate::shim::Announcement;

/// How long a shim may take to report whether the container started.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// What became of an attempt to start a run.
#[derive(Debug)]
pub(crate) enum Launched {
    /// The container runs; the watch resolves when its shim exits.
    Running(RunRecord, ShimWatch),
    /// It could not be started; the exit record says why.
    Failed(ExitRecord),
}

/// Why a run could not even be attempted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchError {
    /// The agent's own files could not be written or the shim could not be started.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// The allocator setting every shim starts with (see [`launch`]).
const SHIM_ALLOCATOR_ENV: (&str, &str) = ("MIMALLOC_ALLOW_THP", "0");

/// Starts run `paths` with `spec` through the shim command `shim` (program and leading
/// arguments). Cancel-safe only before the shim is started: dropped later, the run goes on
/// and is adopted from its records.
pub(crate) async fn launch(
    shim: &[OsString],
    pod_dir: &Path,
    paths: &RunPaths,
    spec: &RunSpec,
) -> Result<Launched, LaunchError> {
    let io = |what: String| move |source| LaunchError::Io { what, source };
    write_json(&paths.spec, spec).map_err(io(format!("writing {}", paths.spec.display())))?;
    if let Some(dir) = paths.log.parent() {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    let shim_log_path = pod_dir.join("shim.log");
    let shim_log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(super::records::PRIVATE_FILE_MODE)
        .open(&shim_log_path)
        .map_err(io(format!("opening {}", shim_log_path.display())))?;
    let (program, leading) = shim.split_first().ok_or_else(|| LaunchError::Io {
        what: "starting the shim".to_owned(),
        source: std::io::Error::other("the agent's shim command is empty"),
    })?;
    let mut child = Command::new(program)
        .args(leading)
        // The shim is usually the `setpoint` binary, whose allocator (mimalloc) backs its
        // arenas with transparent huge pages: each shim would then fault in and clear several
        // 2 MiB pages (8 MiB of PSS per shim, 200 pods starting took twice as long). A shim
        // needs little memory, so it asks for small pages. The container does not inherit
        // this: the shim gives it only the pod's environment.
        .env(SHIM_ALLOCATOR_ENV.0, SHIM_ALLOCATOR_ENV.1)
        .arg("--spec")
        .arg(&paths.spec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(shim_log)
        .kill_on_drop(false)
        .spawn()
        .map_err(io(format!(
            "starting the shim {}",
            Path::new(program).display()
        )))?;
    let stdout = child.stdout.take();
    let report = async {
        let mut line = String::new();
        if let Some(stdout) = stdout {
            tokio::io::BufReader::new(stdout)
                .read_line(&mut line)
                .await?;
        }
        Ok::<_, std::io::Error>(line)
    };
    let announcement = match tokio::time::timeout(START_TIMEOUT, report).await {
        Ok(Ok(line)) => serde_json::from_str::<Announcement>(line.trim()).map_err(|_| {
            format!(
                "the shim exited without reporting a start (see {})",
                shim_log_path.display()
            )
        }),
        Ok(Err(e)) => Err(format!("reading the shim's report: {e}")),
        Err(_) => Err("the shim did not report within 30 s".to_owned()),
    };
    match announcement {
        Ok(Announcement::Started(record)) => Ok(Launched::Running(record, ShimWatch::child(child))),
        other => {
            // The shim has exited or is about to: reap it, then read what it recorded.
            let _ = child.wait().await;
            let recorded = read_json::<ExitRecord>(&paths.exit_record).ok().flatten();
            let message = match other {
                Ok(Announcement::Failed(message)) | Err(message) => message,
                Ok(Announcement::Started(_)) => unreachable!("matched above"),
            };
            Ok(Launched::Failed(recorded.unwrap_or_else(|| ExitRecord {
                exit_code: 128,
                signal: None,
                reason: "StartError".to_owned(),
                message: Some(message),
                started_at: None,
                finished_at: super::records::now(),
            })))
        }
    }
}
