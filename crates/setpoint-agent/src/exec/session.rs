//! Running one remote command for a [`RemoteCommandSession`]: the exec helper started with
//! pipes (or a pseudo-terminal with `tty`), the client's input copied to its stdin (closed
//! when the client closes stdin), its output to the client, resizes applied, and its exit
//! status reported as a [`CommandOutcome`]. If the client goes away first, the command's
//! whole process group is killed.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::Command;
use tokio::sync::mpsc;

use super::pty::{self, Pty};
use super::target::RunningContainer;
use crate::streams::{CommandOutcome, RemoteCommandSession};

/// How long output is still read after the command exited (a process it left in the
/// background may hold the output open).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs `argv` in `container`'s context through the exec helper of the shim command `shim`.
pub(crate) async fn exec_in(
    shim: &[OsString],
    container: &RunningContainer,
    argv: &[String],
    session: RemoteCommandSession,
) {
    let Some((program, leading)) = shim.split_first() else {
        let _ = session.outcome.send(CommandOutcome::Error(
            "the agent has no shim command".to_owned(),
        ));
        return;
    };
    let mut command = Command::new(program);
    command.args(leading).args(super::helper::helper_args(
        container.pid,
        &container.spec_path,
        session.flags.tty,
        argv,
    ));
    run(command, session).await;
}

/// Runs `command` (the helper, or any program in tests) for `session`. With `tty` the
/// command is expected to make itself a session leader (the helper does); without, it runs
/// in a process group of its own.
pub(crate) async fn run(mut command: Command, session: RemoteCommandSession) {
    let RemoteCommandSession {
        flags,
        stdin,
        stdout,
        stderr,
        resize,
        outcome,
    } = session;
    command.kill_on_drop(true);
    let mut pumps = Vec::new();
    let mut feeder = None;
    let mut child = if flags.tty {
        let pty = match Pty::open() {
            Ok(pty) => pty,
            Err(e) => {
                let _ = outcome.send(CommandOutcome::Error(format!("opening a terminal: {e}")));
                return;
            }
        };
        let stdio = |fd: &std::os::fd::OwnedFd| fd.try_clone().map(Stdio::from);
        match (stdio(&pty.secondary), stdio(&pty.secondary)) {
            (Ok(a), Ok(b)) => {
                command
                    .stdin(a)
                    .stdout(b)
                    .stderr(Stdio::from(pty.secondary));
            }
            (Err(e), _) | (_, Err(e)) => {
                let _ = outcome.send(CommandOutcome::Error(format!("opening a terminal: {e}")));
                return;
            }
        }
        let spawned = command.spawn();
        // Our copies of the secondary side must be gone for the primary to see the end.
        drop(command);
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = outcome.send(CommandOutcome::Error(format!("starting the command: {e}")));
                return;
            }
        };
        let primary = Arc::new(pty.primary);
        {
            // Read even when the client wants no output: a full terminal would stop the
            // command.
            let primary = primary.clone();
            pumps.push(tokio::spawn(async move {
                let mut buf = vec![0u8; 32 * 1024];
                while let Ok(n) = pty::read(&primary, &mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if let Some(out) = &stdout {
                        if out.send(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                            break;
                        }
                    }
                }
            }));
        }
        if let Some(mut input) = stdin {
            let primary = primary.clone();
            feeder = Some(tokio::spawn(async move {
                while let Some(data) = input.recv().await {
                    if pty::write_all(&primary, &data).await.is_err() {
                        break;
                    }
                }
            }));
        }
        if let Some(mut sizes) = resize {
            let primary = primary.clone();
            tokio::spawn(async move {
                while let Some(size) = sizes.recv().await {
                    let _ = pty::resize(&primary, size.width, size.height);
                }
            });
        }
        child
    } else {
        command
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(if stdout.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(if stderr.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .process_group(0);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                let _ = outcome.send(CommandOutcome::Error(format!("starting the command: {e}")));
                return;
            }
        };
        drop(command);
        if let (Some(out), Some(pipe)) = (stdout, child.stdout.take()) {
            pumps.push(tokio::spawn(copy_out(pipe, out)));
        }
        if let (Some(err), Some(pipe)) = (stderr, child.stderr.take()) {
            pumps.push(tokio::spawn(copy_out(pipe, err)));
        }
        if let (Some(mut input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            feeder = Some(tokio::spawn(async move {
                while let Some(data) = input.recv().await {
                    if pipe.write_all(&data).await.is_err() {
                        return;
                    }
                }
                // The client closed stdin: so does the command's.
                let _ = pipe.shutdown().await;
            }));
        }
        child
    };
    let pid = child.id();
    let mut outcome = outcome;
    let status = tokio::select! {
        status = child.wait() => status,
        () = outcome.closed() => {
            // The client went away: end everything the command started.
            kill_group(pid);
            let _ = child.kill().await;
            if let Some(feeder) = feeder {
                feeder.abort();
            }
            return;
        }
    };
    if let Some(feeder) = feeder {
        feeder.abort();
    }
    let drained = async {
        for pump in pumps {
            let _ = pump.await;
        }
    };
    if tokio::time::timeout(DRAIN_TIMEOUT, drained).await.is_err() {
        kill_group(pid);
    }
    let result = match status {
        Ok(status) => match status.code().or_else(|| status.signal().map(|s| 128 + s)) {
            Some(0) => CommandOutcome::Success,
            Some(code) => CommandOutcome::ExitCode(code),
            None => CommandOutcome::Error("the command ended without a status".to_owned()),
        },
        Err(e) => CommandOutcome::Error(format!("waiting for the command: {e}")),
    };
    let _ = outcome.send(result);
}

/// Copies one output pipe to the client until either ends.
async fn copy_out(mut pipe: impl AsyncRead + Unpin, to: mpsc::Sender<Bytes>) {
    let mut buf = vec![0u8; 32 * 1024];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 || to.send(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
            break;
        }
    }
}

/// SIGKILL to the process group led by `pid` (the helper's session or group), if it leads one.
fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
