//! The exec helper: `setpoint agent-shim exec --target PID --spec FILE [--tty] -- ARGV…`, a
//! freshly started, single-threaded process that puts itself in a container's context and
//! then becomes the command (or, when it had to join a PID namespace, starts it and waits).
//!
//! In order: with `--tty`, a session of its own whose controlling terminal is its stdin (the
//! pseudo-terminal the agent gave it); the container's cgroup (from the run's spec); the
//! namespaces of the container's main process `PID` that differ from its own (`ipc`, `uts`,
//! `net`, `pid`, `mnt`; `setns` through rustix); the container's uid and gid (those of `PID`,
//! when they differ from its own); then the command, with the run's environment and working
//! directory.
//!
//! Exit codes: the command's; `126` when the command cannot be run or the context cannot be
//! entered, `127` when it is not found, each with a runc-like message on stderr
//! (`exec: "x": executable file not found in $PATH`).

use std::ffi::OsString;
use std::io::Write as _;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use crate::process::{read_json, RunSpec};

/// The namespaces a command joins when its container's differ from the helper's; the mount
/// namespace last (after it, `/proc` may be another).
const NAMESPACES: [&str; 5] = ["ipc", "uts", "net", "pid", "mnt"];

/// What the helper was asked.
#[derive(Debug, PartialEq)]
pub(crate) struct HelperArgs {
    /// The container's main process.
    pub(crate) target: i32,
    /// The run's spec file.
    pub(crate) spec: PathBuf,
    /// Whether stdin is a terminal to make the controlling terminal.
    pub(crate) tty: bool,
    /// The command.
    pub(crate) argv: Vec<OsString>,
}

/// The helper's command line (what the agent appends to the shim command).
pub(crate) fn helper_args(
    target: i32,
    spec: &std::path::Path,
    tty: bool,
    argv: &[String],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "exec".into(),
        "--target".into(),
        target.to_string().into(),
        "--spec".into(),
        spec.as_os_str().to_owned(),
    ];
    if tty {
        args.push("--tty".into());
    }
    args.push("--".into());
    args.extend(argv.iter().map(OsString::from));
    args
}

/// Parses the arguments after `exec`.
pub(crate) fn parse(args: Vec<OsString>) -> Result<HelperArgs, String> {
    let usage = || {
        "usage: setpoint agent-shim exec --target PID --spec FILE [--tty] -- COMMAND…".to_owned()
    };
    let mut target = None;
    let mut spec = None;
    let mut tty = false;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--target") => {
                target = args.next().and_then(|v| v.to_str()?.parse::<i32>().ok());
            }
            Some("--spec") => spec = args.next().map(PathBuf::from),
            Some("--tty") => tty = true,
            Some("--") => break,
            _ => return Err(usage()),
        }
    }
    let argv: Vec<OsString> = args.collect();
    match (target, spec) {
        (Some(target), Some(spec)) if !argv.is_empty() && target > 0 => Ok(HelperArgs {
            target,
            spec,
            tty,
            argv,
        }),
        _ => Err(usage()),
    }
}

/// Runs the helper with the arguments after `exec`; returns only if the command could not
/// be run (or was run as a child, in another PID namespace).
pub(crate) fn exec_main(args: Vec<OsString>) -> ExitCode {
    let args = match parse(args) {
        Ok(args) => args,
        Err(message) => return fail(2, &message),
    };
    let spec: RunSpec = match read_json(&args.spec) {
        Ok(Some(spec)) => spec,
        Ok(None) => return fail(126, &format!("{} does not exist", args.spec.display())),
        Err(e) => return fail(126, &format!("reading {}: {e}", args.spec.display())),
    };
    if args.tty {
        if let Err(e) = controlling_terminal() {
            return fail(126, &format!("setting up the terminal: {e}"));
        }
    }
    join_cgroup(&spec);
    let joined_pid_namespace = match join_namespaces(args.target) {
        Ok(joined) => joined,
        Err(message) => return fail(126, &message),
    };
    let Some((program, rest)) = args.argv.split_first() else {
        return fail(2, "no command");
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.working_dir);
    if let Some((uid, gid)) = ids_to_take(args.target) {
        command.uid(uid).gid(gid);
    }
    if joined_pid_namespace {
        // Only children are born in the namespace joined: start the command and wait.
        match command.status() {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt as _;
                let code = status
                    .code()
                    .or_else(|| status.signal().map(|s| 128 + s))
                    .unwrap_or(255);
                ExitCode::from(u8::try_from(code).unwrap_or(255))
            }
            Err(e) => not_run(program, &e),
        }
    } else {
        let e = command.exec();
        not_run(program, &e)
    }
}

/// The shim's session helper for a container with `tty: true`:
/// `agent-shim exec-session -- ARGV…` makes a session of its own whose controlling terminal is
/// its stdin (the pseudo-terminal the shim opened), then becomes the container's command
/// (environment and working directory as the shim set them).
pub(crate) fn session_main(args: Vec<OsString>) -> ExitCode {
    let mut args = args.into_iter();
    if args.next().is_none_or(|a| a != "--") {
        return fail(2, "usage: setpoint agent-shim exec-session -- COMMAND…");
    }
    let argv: Vec<OsString> = args.collect();
    let Some((program, rest)) = argv.split_first() else {
        return fail(2, "no command");
    };
    if let Err(e) = controlling_terminal() {
        // The command still runs on the terminal, only without job control.
        let _ = writeln!(
            std::io::stderr(),
            "setpoint agent-shim: no controlling terminal: {e}"
        );
    }
    let e = Command::new(program).args(rest).exec();
    not_run(program, &e)
}

/// A session of our own with stdin (a terminal's secondary side) as its controlling terminal.
fn controlling_terminal() -> std::io::Result<()> {
    rustix::process::setsid()?;
    rustix::process::ioctl_tiocsctty(std::io::stdin().as_fd())?;
    Ok(())
}

/// Moves this process into the run's cgroups that still exist: those limiting its resources
/// (v1: one per hierarchy — what it starts counts against the container's limits) and the one
/// tracking its processes (it dies with the container). Best effort.
fn join_cgroup(spec: &RunSpec) {
    let limit_dirs = spec
        .limits
        .iter()
        .flat_map(|limits| limits.cgroups.iter().map(|c| &c.cgroup.dir));
    for dir in limit_dirs.chain(spec.cgroup.iter().map(|c| &c.dir)) {
        let procs = dir.join("cgroup.procs");
        if procs.exists() {
            let _ = std::fs::write(procs, std::process::id().to_string());
        }
    }
}

/// Joins each namespace of `target` that differs from ours; whether the PID namespace was one.
fn join_namespaces(target: i32) -> Result<bool, String> {
    let mut to_join: Vec<(&str, OwnedFd)> = Vec::new();
    for ns in NAMESPACES {
        let theirs_path = format!("/proc/{target}/ns/{ns}");
        let Ok(theirs) = rustix::fs::stat(theirs_path.as_str()) else {
            continue;
        };
        let ours = rustix::fs::stat(format!("/proc/self/ns/{ns}").as_str()).ok();
        if ours.is_some_and(|o| o.st_ino == theirs.st_ino && o.st_dev == theirs.st_dev) {
            continue;
        }
        let fd = rustix::fs::open(
            theirs_path.as_str(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| format!("opening the container's {ns} namespace: {e}"))?;
        to_join.push((ns, fd));
    }
    let mut pid = false;
    for (ns, fd) in to_join {
        rustix::thread::move_into_link_name_space(fd.as_fd(), None)
            .map_err(|e| format!("joining the container's {ns} namespace: {e}"))?;
        pid |= ns == "pid";
    }
    Ok(pid)
}

/// The target's real uid and gid, when they differ from ours (and we may take them).
fn ids_to_take(target: i32) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{target}/status")).ok()?;
    let first = |key: &str| -> Option<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let (uid, gid) = (first("Uid:")?, first("Gid:")?);
    let ours = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    (ours != (uid, gid) && ours.0 == 0).then_some((uid, gid))
}

/// Reports a command that could not be run, as runc words it; 127 if not found, else 126.
fn not_run(program: &OsString, error: &std::io::Error) -> ExitCode {
    let name = program.to_string_lossy();
    let (code, why) = match error.kind() {
        std::io::ErrorKind::NotFound if !name.contains('/') => {
            (127, "executable file not found in $PATH".to_owned())
        }
        std::io::ErrorKind::NotFound => (127, "no such file or directory".to_owned()),
        std::io::ErrorKind::PermissionDenied => (126, "permission denied".to_owned()),
        _ => (126, error.to_string()),
    };
    fail(code, &format!("exec: {name:?}: {why}"))
}

fn fail(code: u8, message: &str) -> ExitCode {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{message}");
    let _ = err.flush();
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_args_should_parse_back() {
        let args = helper_args(
            42,
            std::path::Path::new("/x/0.spec.json"),
            true,
            &["sh".into(), "-c".into(), "--tty".into()],
        );
        let parsed = parse(args[1..].to_vec()).expect("parsed");
        assert_eq!(
            parsed,
            HelperArgs {
                target: 42,
                spec: PathBuf::from("/x/0.spec.json"),
                tty: true,
                argv: vec!["sh".into(), "-c".into(), "--tty".into()],
            }
        );
        assert!(parse(vec!["--target".into(), "1".into(), "--".into(), "x".into()]).is_err());
        assert!(parse(vec![
            "--target".into(),
            "1".into(),
            "--spec".into(),
            "f".into(),
            "--".into()
        ])
        .is_err());
    }
}
