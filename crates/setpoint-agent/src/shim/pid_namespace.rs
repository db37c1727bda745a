//! A PID namespace per pod (`shareProcessNamespace: true`, as root with mount namespaces).
//!
//! - `agent-shim pod-init RECORD` (started by the agent, [`start_pod_init`]): in this fresh,
//!   single-threaded process, `unshare(CLONE_NEWPID)`, then start the pod's init — the same
//!   binary in its `--pod-init-reaper` mode, PID 1 of the new namespace — record its pid and
//!   start time at `RECORD` ([`PidNamespace`]) and exit (the init's command line names
//!   `RECORD`, so `ps` tells whose it is). The init is left running detached (in
//!   a session of its own), so it outlives agent restarts; it only reaps orphans. Stopping it
//!   ([`PidNamespace::stop`]) is `SIGKILL`, which the kernel turns into killing every process
//!   left in the namespace.
//! - Each container's shim joins the namespace just for its spawn ([`spawn`]: `setns` on the
//!   init's `/proc/<pid>/ns/pid`, so the container it starts is in it, then back), and wraps the program in
//!   `--proc-mount` ([`wrapped`]): a helper (already in the namespace) that moves into a mount
//!   namespace of its own, private, mounts a fresh procfs on `/proc` and executes the
//!   program — `ps` and `/proc` in the container show the pod's processes only, while the shim
//!   keeps the host's `/proc`.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::process::{ProcessId, RunSpec};

/// The shim subcommand that makes a pod's PID namespace.
pub(crate) const POD_INIT: &str = "pod-init";
/// The mode of the pod's init itself (PID 1 in the namespace).
pub(crate) const POD_INIT_REAPER: &str = "--pod-init-reaper";
/// The helper that mounts `/proc` for the namespace, then executes the container's program.
pub(crate) const PROC_MOUNT: &str = "--proc-mount";

/// The init's record in the pod directory.
pub(crate) const RECORD_FILE: &str = "pid-namespace.json";

/// A pod's PID namespace, named by its init process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PidNamespace {
    /// The init's pid (in the agent's namespace).
    pub(crate) init_pid: i32,
    /// Its start time (`/proc/<pid>/stat`), so a reused pid is never mistaken for it.
    pub(crate) init_start_time: u64,
}

impl PidNamespace {
    fn init(&self) -> ProcessId {
        ProcessId {
            pid: self.init_pid,
            start_time: self.init_start_time,
        }
    }

    /// Whether its init still runs.
    pub(crate) fn is_alive(&self) -> bool {
        self.init().is_alive()
    }

    /// Kills the init (and with it every process left in the namespace); waits a little for
    /// it to be gone.
    pub(crate) fn stop(&self) {
        if !self.is_alive() {
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.init_pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.is_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The agent's side: the pod's namespace recorded at `record` if its init still runs, else a
/// new one made by `shim … pod-init record`.
pub(crate) fn start_pod_init(shim: &[OsString], record: &Path) -> Result<PidNamespace, String> {
    if let Ok(Some(ns)) = crate::process::read_json::<PidNamespace>(record) {
        if ns.is_alive() {
            return Ok(ns);
        }
    }
    let _ = std::fs::remove_file(record);
    let (program, args) = shim.split_first().ok_or("no shim program")?;
    let output = Command::new(program)
        .args(args)
        .arg(POD_INIT)
        .arg(record)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("starting the pod's init: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "starting the pod's init: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    match crate::process::read_json::<PidNamespace>(record) {
        Ok(Some(ns)) if ns.is_alive() => Ok(ns),
        Ok(_) => Err("the pod's init is not running".to_owned()),
        Err(e) => Err(format!("reading {}: {e}", record.display())),
    }
}

/// `setpoint agent cleanup`: stops the init of every pod under `pods_dir` (their containers
/// are stopped by then); one line per init stopped.
pub(crate) fn stop_recorded(pods_dir: &Path) -> Vec<String> {
    let mut stopped = Vec::new();
    let Ok(dirs) = std::fs::read_dir(pods_dir) else {
        return stopped;
    };
    for dir in dirs.flatten() {
        let record = dir.path().join(RECORD_FILE);
        if let Ok(Some(ns)) = crate::process::read_json::<PidNamespace>(&record) {
            if ns.is_alive() {
                ns.stop();
                stopped.push(format!(
                    "{}: stopped the pod's PID namespace init ({})",
                    dir.file_name().to_string_lossy(),
                    ns.init_pid
                ));
            }
            let _ = std::fs::remove_file(&record);
        }
    }
    stopped
}

/// The words that run this binary as the shim again (`agent-shim` for `setpoint agent-shim`):
/// the arguments before `until`.
fn shim_prefix(until: &str) -> Vec<OsString> {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != until)
        .collect()
}

/// `agent-shim pod-init RECORD`.
pub(crate) fn pod_init_main(args: &[OsString]) -> ExitCode {
    let [record] = args else {
        eprintln!("usage: setpoint agent-shim {POD_INIT} RECORD");
        return ExitCode::from(2);
    };
    match make_namespace(Path::new(record)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("setpoint agent-shim: {message}");
            ExitCode::FAILURE
        }
    }
}

fn make_namespace(record: &Path) -> Result<(), String> {
    // Out of the agent's session: its signals and terminal never reach the init.
    let _ = rustix::process::setsid();
    // Only `CLONE_NEWPID`, in a process that has started no thread (see `network/netns.rs`).
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWPID)
        .map_err(|e| format!("unshare(CLONE_NEWPID): {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let child = Command::new(exe)
        .args(shim_prefix(POD_INIT))
        .arg(POD_INIT_REAPER)
        // Not read: names the pod (its directory) in `ps`.
        .arg(record)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the pod's init: {e}"))?;
    let pid = child.id() as i32;
    let init = ProcessId::of_child(pid).ok_or("the pod's init exited at once")?;
    let ns = PidNamespace {
        init_pid: init.pid,
        init_start_time: init.start_time,
    };
    crate::process::write_json(record, &ns).map_err(|e| {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap_or(rustix::process::Pid::INIT),
            rustix::process::Signal::KILL,
        );
        format!("writing {}: {e}", record.display())
    })
}

/// The pod's init: reaps whatever is reparented to it, until it is killed.
pub(crate) fn reaper_main() -> ExitCode {
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // No child at the moment.
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The shim's spawn: the container's process is started in the pod's PID namespace if the
/// spec names one. The shim joins it for its children just around the spawn and goes back to
/// its own right after (a process whose children would be in another PID namespace cannot
/// start threads, and the shim needs some). An error means the container must not run: it
/// would see the host's processes.
pub(crate) fn spawn(spec: &RunSpec, command: &mut Command) -> std::io::Result<std::process::Child> {
    let Some(ns) = &spec.pid_namespace else {
        return command.spawn();
    };
    let ours = std::fs::File::open("/proc/self/ns/pid")?;
    let theirs = std::fs::File::open(format!("/proc/{}/ns/pid", ns.init_pid))
        .map_err(|e| std::io::Error::other(format!("opening the pod's PID namespace: {e}")))?;
    // Checked after opening: the file is then the namespace of the init we recorded.
    if !ns.is_alive() {
        return Err(std::io::Error::other(
            "the pod's PID namespace is gone (its init exited)",
        ));
    }
    join(&theirs)
        .map_err(|e| std::io::Error::other(format!("joining the pod's PID namespace: {e}")))?;
    let spawned = command.spawn();
    if let Err(e) = join(&ours) {
        if let Ok(mut child) = spawned {
            let _ = child.kill();
            let _ = child.wait();
        }
        return Err(std::io::Error::other(format!(
            "returning to the shim's own PID namespace: {e}"
        )));
    }
    spawned
}

fn join(ns: &std::fs::File) -> rustix::io::Result<()> {
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(ns),
        Some(rustix::thread::LinkNameSpaceType::ProcessID),
    )
}

/// The program and arguments to spawn: wrapped in the `/proc` helper when the container is in
/// the pod's PID namespace and mounts are possible.
pub(crate) fn wrapped(spec: &RunSpec, program: String, args: Vec<String>) -> (String, Vec<String>) {
    if spec.pid_namespace.is_none() || !spec.mount_namespace {
        return (program, args);
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
    let mut wrapped: Vec<String> = shim_prefix("--spec")
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    wrapped.extend([PROC_MOUNT.to_owned(), "--".to_owned(), program]);
    wrapped.extend(args);
    (exe.to_string_lossy().into_owned(), wrapped)
}

/// `--proc-mount -- PROGRAM ARGS…`: mounts the namespace's `/proc` in a private mount
/// namespace, then becomes the program. A mount that fails is reported on stderr (the
/// container's log) and the program runs with the `/proc` it has.
pub(crate) fn proc_mount_main(args: &[OsString]) -> ExitCode {
    let Some((program, args)) = args
        .split_first()
        .filter(|(dash, _)| *dash == "--")
        .and_then(|(_, rest)| rest.split_first())
    else {
        eprintln!("usage: setpoint agent-shim {PROC_MOUNT} -- PROGRAM ARGS…");
        return ExitCode::from(2);
    };
    if let Err(message) = mount_proc() {
        eprintln!("setpoint agent-shim: /proc shows the host's processes: {message}");
    }
    let error = std::os::unix::process::CommandExt::exec(Command::new(program).args(args));
    eprintln!("setpoint agent-shim: exec {program:?}: {error}");
    ExitCode::from(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

fn mount_proc() -> Result<(), String> {
    use rustix::mount::{MountFlags, MountPropagationFlags};
    // Only `CLONE_NEWNS`, in a fresh process that has started no thread.
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNS)
        .map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    rustix::mount::mount(
        "proc",
        "/proc",
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .map_err(|e| format!("mounting proc on /proc: {e}"))
}
