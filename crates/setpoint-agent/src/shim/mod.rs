//! The container shim: a small synchronous supervisor process, started by the agent for each
//! container run (`setpoint agent-shim --spec FILE`), that owns the container's process,
//! writes its log and records its exit, and outlives an agent restart.
//!
//! What it does, in order:
//! 1. leaves the agent's session (`setsid`): signals meant for the agent or the terminal it
//!    runs in (Ctrl-C, SIGHUP) never reach it or the container;
//! 2. becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever the container starts
//!    and orphans is reparented to the shim, not to init, so it stays a descendant;
//! 3. reads the [`RunSpec`](crate::process::RunSpec) and starts the container's process with
//!    exactly that argv, environment and working directory, in a process group of its own,
//!    stdin from `/dev/null` (a pipe for attached clients when the container's spec has
//!    `stdin: true`), stdout and stderr into pipes — inside the spec's cgroup if it
//!    names one (the shim joins the cgroup, starts the process, and leaves; if it cannot
//!    join, the run goes on without a cgroup);
//!    — first, if the spec asks, in a mount namespace of its own with the container's
//!    volumes bind-mounted (`volumes/namespace.rs`);
//!    — and first of all inside the run's limit cgroups with its `oom_score_adj`, as the
//!    spec's user and group (`shim/limits.rs`); a limit that cannot be applied fails the run;
//! 4. writes the run record (its own and the container's pid and start time, the cgroup
//!    used), then reports on its stdout one JSON line, `{"started": <run record>}` or
//!    `{"failed": "<why>"}`, and never writes to stdout again (so an agent gone away cannot
//!    hurt it with SIGPIPE);
//! 5. serves the run's attach socket (`attach.rs`: output fan-out, stdin), and copies the
//!    container's output into the log (and to attached clients) until its main process exits,
//!    reaping the orphans reparented to it meanwhile;
//! 6. kills everything the container started (a container ends with its main process, as in
//!    a container runtime): its process group, then every process in its cgroup — or,
//!    without a cgroup, every descendant of the shim — and removes the cgroup; drains the
//!    output (bounded) and writes the exit record (reason `OOMKilled` if the memory cgroup
//!    counted an OOM kill meanwhile); then exits 0.
//!
//! With `RunSpec::pid_namespace`, the shim joins the pod's PID namespace before the spawn
//! (`pid_namespace.rs`, which also has the `pod-init` subcommand that makes it).
//!
//! `agent-shim exec …` is another subcommand: the exec helper (`exec/helper.rs`).
//!
//! A process that cannot be started gets an exit record with exit code 128 and reason
//! `StartError`, as container runtimes report it.

pub(crate) mod attach;

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use parking_lot::Mutex;

use rustix::process::{WaitOptions, WaitStatus};

use crate::logs::{LogStream, LogWriter};
use crate::process::{cgroup, now, tree, write_json, ExitRecord, ProcessId, RunRecord, RunSpec};

mod limits;
mod network;
pub(crate) mod pid_namespace;

/// How long the shim drains the container's output after it exited (its processes are
/// killed by then, but a process outside the container may have inherited the pipes).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How long killing what the container left may take.
const KILL_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs the shim with its command-line arguments (after the program and subcommand names):
/// `--spec FILE` (or `--exec-as …`, the identity helper of `shim/limits.rs`). Returns when the container has exited and its exit is recorded.
pub fn shim_main(args: Vec<OsString>) -> ExitCode {
    if args.first().is_some_and(|a| a == "--netns-pin") {
        return crate::network::netns::pin_main(args[1..].to_vec());
    }
    if args.first().is_some_and(|a| a == pid_namespace::POD_INIT) {
        return pid_namespace::pod_init_main(&args[1..]);
    }
    if args
        .first()
        .is_some_and(|a| a == pid_namespace::POD_INIT_REAPER)
    {
        return pid_namespace::reaper_main();
    }
    if args.first().is_some_and(|a| a == pid_namespace::PROC_MOUNT) {
        return pid_namespace::proc_mount_main(&args[1..]);
    }
    if args.first().is_some_and(|a| a == limits::EXEC_AS) {
        return limits::exec_as_main(&args[1..]);
    }
    if args.first().is_some_and(|a| a == "exec") {
        return crate::exec::helper::exec_main(args.into_iter().skip(1).collect());
    }
    if args.first().is_some_and(|a| a == "exec-session") {
        return crate::exec::helper::session_main(args.into_iter().skip(1).collect());
    }
    let spec_path = match parse_args(args) {
        Ok(path) => path,
        Err(message) => {
            eprintln!("setpoint agent-shim: {message}");
            return ExitCode::from(2);
        }
    };
    // Not a group leader (the agent started us in its own group), so this cannot fail but
    // for a reason worth knowing.
    if let Err(e) = rustix::process::setsid() {
        eprintln!("setpoint agent-shim: setsid: {e}");
    }
    let spec: RunSpec = match crate::process::read_json(&spec_path) {
        Ok(Some(spec)) => spec,
        Ok(None) => return fail_early(&format!("{} does not exist", spec_path.display())),
        Err(e) => return fail_early(&format!("reading {}: {e}", spec_path.display())),
    };
    match supervise(&spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("setpoint agent-shim: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(args: Vec<OsString>) -> Result<PathBuf, String> {
    let mut args = args.into_iter();
    match (args.next(), args.next(), args.next()) {
        (Some(flag), Some(path), None) if flag == "--spec" => Ok(PathBuf::from(path)),
        _ => Err("usage: setpoint agent-shim --spec FILE".to_owned()),
    }
}

/// Reports a failure before any container existed.
fn fail_early(message: &str) -> ExitCode {
    eprintln!("setpoint agent-shim: {message}");
    announce(&Announcement::Failed(message.to_owned()));
    ExitCode::FAILURE
}

/// The one line the shim writes on its stdout.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Announcement {
    /// The container runs.
    Started(RunRecord),
    /// It could not be started; the exit record says why (if it could be written).
    Failed(String),
}

fn announce(announcement: &Announcement) {
    let mut out = std::io::stdout().lock();
    if let Ok(line) = serde_json::to_string(announcement) {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

fn supervise(spec: &RunSpec) -> Result<(), String> {
    let writer = LogWriter::create(&spec.log)
        .map_err(|e| format!("creating the log {}: {e}", spec.log.display()))?;
    let writer = Arc::new(Mutex::new(writer));
    let Some((program, args)) = spec.argv.split_first() else {
        return start_failed(spec, "the container has no command".to_owned());
    };
    if let Err(message) = network::enter(spec) {
        return start_failed(spec, message);
    }
    if spec.mount_namespace && !spec.mounts.is_empty() {
        // Without its mounts the container still finds its volumes through the environment
        // (`SETPOINT_MOUNT_*`), so a failure here is reported, not fatal.
        if let Err(e) = crate::volumes::namespace::enter(&spec.mounts) {
            eprintln!("setpoint agent-shim: volumes are not mounted (the container finds them through SETPOINT_MOUNT_* variables): {e}");
        }
    }
    // The identity helper wraps the program when the container runs as another user
    // (`limits.rs`); pipes, or a terminal for a container with `tty: true` (`attach.rs`).
    let (program, args) = limits::wrapped(program, args, spec.run_as.as_ref());
    let (program, args) = pid_namespace::wrapped(spec, program, args);
    let (mut command, terminal) = attach::container_command(spec, &program, &args);
    command
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.working_dir);
    if let Err(e) = tree::become_subreaper() {
        eprintln!("setpoint agent-shim: cannot become a child subreaper: {e}");
    }
    // Limits first (a v2 limit cgroup is the tracking cgroup joined next); fatal if unmet.
    let mut limited = match limits::enter(spec.limits.as_ref()) {
        Ok(entered) => entered,
        Err(message) => return start_failed(spec, format!("applying resource limits: {message}")),
    };
    let joined = spec.cgroup.as_ref().and_then(|cg| match cgroup::join(cg) {
        Ok(joined) => Some((cg.clone(), joined)),
        Err(e) => {
            eprintln!(
                "setpoint agent-shim: not using the cgroup {}: {e}",
                cg.dir.display()
            );
            None
        }
    });
    let spawned = pid_namespace::spawn(spec, &mut command);
    if let Err(message) = limited.leave() {
        // Still inside a limit cgroup: the shim would share the container's limits.
        if let Ok(mut child) = spawned {
            let _ = child.kill();
            let _ = child.wait();
        }
        return start_failed(spec, message);
    }
    if spawned.is_err() {
        limited.remove();
    }
    // Its copies of a terminal's secondary side must go, or the output never ends.
    drop(command);
    let mut cgroup_used = None;
    if let Some((cg, joined)) = joined {
        if let Err(e) = joined.leave() {
            // Still inside: killing the cgroup would kill the shim. Give up the run.
            if let Ok(mut child) = spawned {
                let _ = child.kill();
                let _ = child.wait();
            }
            return start_failed(
                spec,
                format!("leaving the cgroup {}: {e}", cg.dir.display()),
            );
        }
        if spawned.is_err() {
            let _ = cgroup::remove(&cg.dir);
        }
        cgroup_used = Some(cg);
    }
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return start_failed(
                spec,
                format!(
                    "failed to start the container process: exec {program:?} in {}: {e}",
                    spec.working_dir.display()
                ),
            )
        }
    };
    let started_at = now();
    let container_pid = child.id() as i32;
    let shim = ProcessId::current(std::process::id() as i32)
        .ok_or("cannot read this process's own /proc entry")?;
    let container = ProcessId::of_child(container_pid).unwrap_or(ProcessId {
        pid: container_pid,
        start_time: 0,
    });
    let record = RunRecord {
        shim_pid: shim.pid,
        shim_start_time: shim.start_time,
        container_pid,
        container_start_time: container.start_time,
        started_at: started_at.clone(),
        cgroup: cgroup_used.clone(),
        limit_cgroups: limited.cgroups().to_vec(),
    };
    if let Err(e) = write_json(&spec.run_record, &record) {
        // Unsupervisable: the agent could never adopt it. Stop it.
        let _ = child.kill();
        let _ = child.wait();
        kill_everything(cgroup_used.as_ref());
        return start_failed(spec, format!("writing {}: {e}", spec.run_record.display()));
    }
    announce(&Announcement::Started(record));

    let attached = attach::serve(spec, child.stdin.take(), terminal.as_ref());
    let (drained_tx, drained_rx) = mpsc::channel();
    let mut pumps = 0;
    if let Some(out) = child.stdout.take() {
        let to = (writer.clone(), attached.clone());
        pump(out, LogStream::Stdout, to, drained_tx.clone());
        pumps += 1;
    }
    if let Some(err) = child.stderr.take() {
        let to = (writer.clone(), attached.clone());
        pump(err, LogStream::Stderr, to, drained_tx.clone());
        pumps += 1;
    }
    if let Some(terminal) = terminal {
        let to = (writer.clone(), attached.clone());
        pump(terminal, LogStream::Stdout, to, drained_tx.clone());
        pumps += 1;
    }
    drop(drained_tx);
    let status = wait_for(container_pid).map_err(|e| format!("waiting for the container: {e}"))?;
    let oom_killed = limited.oom_killed();
    let _ = container.signal_group(rustix::process::Signal::KILL);
    kill_everything(cgroup_used.as_ref());
    limited.remove();
    let deadline = std::time::Instant::now() + DRAIN_TIMEOUT;
    for _ in 0..pumps {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if drained_rx.recv_timeout(left).is_err() {
            eprintln!("setpoint agent-shim: output still open after the container exited; not waiting for it");
            break;
        }
    }
    if let Some(attached) = &attached {
        attached.finish();
    }
    if let Err(e) = writer.lock().finish() {
        eprintln!("setpoint agent-shim: finishing the log: {e}");
    }
    let mut exit = ExitRecord::of_exit(
        status.exit_status(),
        status.terminating_signal(),
        Some(started_at),
    );
    if oom_killed && exit.exit_code != 0 {
        exit.reason = "OOMKilled".to_owned();
    }
    write_json(&spec.exit_record, &exit)
        .map_err(|e| format!("writing {}: {e}", spec.exit_record.display()))
}

/// Waits for the child `pid` to exit, reaping the other children (orphans of the container
/// reparented to the shim) as they exit.
fn wait_for(pid: i32) -> std::io::Result<WaitStatus> {
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((exited, status))) if exited.as_raw_nonzero().get() == pid => {
                return Ok(status)
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Kills everything the container started: every process in its cgroup (then removes the
/// cgroup), or without one every descendant of the shim; reaps what were the shim's children.
fn kill_everything(cgroup_used: Option<&cgroup::RunCgroup>) {
    match cgroup_used {
        Some(cg) => {
            if let Err(e) = cgroup::kill(&cg.dir, KILL_TIMEOUT) {
                eprintln!("setpoint agent-shim: {e}");
            }
            tree::reap_children();
            if let Err(e) = cgroup::remove(&cg.dir) {
                eprintln!("setpoint agent-shim: removing {}: {e}", cg.dir.display());
            }
        }
        None => {
            tree::kill_descendants(KILL_TIMEOUT);
        }
    }
    tree::reap_children();
}

/// Records and reports a container that could not be started.
fn start_failed(spec: &RunSpec, message: String) -> Result<(), String> {
    let exit = ExitRecord {
        exit_code: 128,
        signal: None,
        reason: "StartError".to_owned(),
        message: Some(message.clone()),
        started_at: None,
        finished_at: now(),
    };
    let written = write_json(&spec.exit_record, &exit);
    announce(&Announcement::Failed(message.clone()));
    written.map_err(|e| format!("{message}; and writing {}: {e}", spec.exit_record.display()))
}

/// Copies one of the container's output pipes into the log (and to attached clients) on a
/// thread of its own; reports on `drained` when the pipe is closed.
fn pump(
    mut from: impl std::io::Read + Send + 'static,
    stream: LogStream,
    (writer, attached): (Arc<Mutex<LogWriter>>, Option<Arc<attach::AttachServer>>),
    drained: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = writer.lock().write(stream, &buf[..n]) {
                        eprintln!("setpoint agent-shim: writing the log: {e}");
                    }
                    if let Some(attached) = &attached {
                        attached.publish(stream, &buf[..n]);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = drained.send(());
    });
}
