//! Waiting for a shim to exit, whether the agent started it (a child, which must be reaped) or
//! adopted it after a restart (not a child: watched through a pidfd).

use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;

use super::proc::ProcessId;

/// A shim being waited for.
#[derive(Debug)]
pub(crate) struct ShimWatch(Inner);

#[derive(Debug)]
enum Inner {
    /// Started by this agent.
    Child(tokio::process::Child),
    /// Adopted: readable when the process exits.
    Pidfd(AsyncFd<OwnedFd>),
    /// Adopted, but pidfds are unavailable: polled.
    Poll(ProcessId),
}

impl ShimWatch {
    /// Watches a shim this agent started.
    pub(crate) fn child(child: tokio::process::Child) -> ShimWatch {
        ShimWatch(Inner::Child(child))
    }

    /// Watches a shim started by an earlier agent; `None` if it is gone already.
    pub(crate) fn adopt(shim: ProcessId) -> Option<ShimWatch> {
        let pid = rustix::process::Pid::from_raw(shim.pid)?;
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK);
        // Checked after opening the pidfd: if the process is still the same now, the pidfd
        // names it (and not a later holder of its pid).
        if !shim.is_alive() {
            return None;
        }
        // `AsyncFd::new` is deprecated because a registered fd could be closed behind tokio's
        // back; here the `AsyncFd` owns the `OwnedFd`, deregisters it before closing it, and
        // the safe replacement (`register`) is `unsafe`, which this crate forbids.
        #[allow(deprecated)]
        let registered = pidfd.map(AsyncFd::new);
        Some(ShimWatch(match registered {
            Ok(Ok(fd)) => Inner::Pidfd(fd),
            _ => Inner::Poll(shim),
        }))
    }

    /// Resolves when the shim has exited. Cancel-safe.
    pub(crate) async fn exited(&mut self) {
        match &mut self.0 {
            Inner::Child(child) => {
                let _ = child.wait().await;
            }
            Inner::Pidfd(fd) => {
                let _ = fd.readable().await;
            }
            Inner::Poll(shim) => {
                while shim.is_alive() {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        }
    }
}
