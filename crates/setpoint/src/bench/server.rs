//! The API server under test: `setpoint server` started from this very executable as a child
//! process, on a fresh data directory and a free loopback port, with its log in a file; or
//! [spawned](ServerProcess::spawn) again on a data directory an earlier one left, to time a
//! restart.
//!
//! The child never outlives a [`ServerProcess`]: dropping one kills it (SIGKILL), which is what
//! happens when a benchmark fails or is interrupted; [`ServerProcess::stop`] does the same and
//! waits for it; [`ServerProcess::terminate`] asks it to shut down (SIGTERM) first. (A SIGKILL
//! of the benchmark itself leaves the server running: nothing can clean up after that.)

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::process::{Child, Command};

use super::kubeconfig::{self, Endpoint};

/// How long the server may take to write its kubeconfig (it creates its CA and certificates
/// first).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How often to look for the kubeconfig.
const POLL: Duration = Duration::from_millis(20);

/// A running `setpoint server` child.
pub(super) struct ServerProcess {
    /// The child; `kill_on_drop` is set.
    child: Child,
    /// Its process id.
    pid: u32,
    /// Its log (standard output and error).
    log: PathBuf,
    /// The admin kubeconfig it wrote.
    kubeconfig: PathBuf,
}

impl ServerProcess {
    /// Starts `setpoint server --data-dir <root>/data --listen 127.0.0.1:0 <extra_args>` with
    /// its log in `<root>/server.log` and waits until it has written its kubeconfig; returns it
    /// with the endpoint the kubeconfig names. The server logs warnings only (`RUST_LOG=warn`),
    /// so that logging is not part of what is measured.
    pub(super) async fn start(root: &Path, extra_args: &[&str]) -> Result<(Self, Endpoint)> {
        let mut server = Self::spawn(root, "127.0.0.1:0", extra_args)?;
        let kubeconfig = server.kubeconfig.clone();
        let endpoint = server
            .wait_for_kubeconfig(&kubeconfig)
            .await
            .with_context(|| server.log_tail())?;
        Ok((server, endpoint))
    }

    /// Starts `setpoint server --data-dir <root>/data --listen <listen> <extra_args>` and returns
    /// at once, without waiting for anything: for a restart on a data directory that has a
    /// kubeconfig already, timed from the moment the process exists. Its log is appended to
    /// `<root>/server.log`.
    pub(super) fn spawn(root: &Path, listen: &str, extra_args: &[&str]) -> Result<Self> {
        let data_dir = root.join("data");
        let log = root.join("server.log");
        let kubeconfig = data_dir.join("admin.kubeconfig");
        // A kubeconfig left by an earlier server names that server's address until this one
        // rewrites it.
        match std::fs::remove_file(&kubeconfig) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", kubeconfig.display())),
        }
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let exe = std::env::current_exe().context("finding this executable")?;
        let child = Command::new(&exe)
            .arg("server")
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--listen", listen])
            .args(extra_args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().context("duplicating the log file")?)
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} server", exe.display()))?;
        let pid = child.id().context("the server exited at once")?;
        Ok(ServerProcess {
            child,
            pid,
            log,
            kubeconfig,
        })
    }

    /// Polls for the kubeconfig until it appears, the server exits or [`START_TIMEOUT`] passes.
    /// The server writes it atomically once it is bound, so a file that exists is complete.
    async fn wait_for_kubeconfig(&mut self, path: &Path) -> Result<Endpoint> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match std::fs::read_to_string(path) {
                Ok(text) => return kubeconfig::parse(&text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            }
            if let Some(status) = self.child.try_wait().context("checking on the server")? {
                bail!("the server exited ({status}) before writing its kubeconfig");
            }
            if Instant::now() >= deadline {
                bail!("the server wrote no kubeconfig within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The admin kubeconfig the server wrote.
    pub(super) fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server's process id.
    pub(super) fn pid(&self) -> u32 {
        self.pid
    }

    /// Fails if the server has exited.
    pub(super) fn check_running(&mut self) -> Result<()> {
        match self.child.try_wait().context("checking on the server")? {
            None => Ok(()),
            Some(status) => bail!("the server exited ({status}); {}", self.log_tail()),
        }
    }

    /// Kills the server (unless it has exited already) and waits for it to exit.
    pub(super) async fn stop(mut self) -> Result<()> {
        if self
            .child
            .try_wait()
            .context("checking on the server")?
            .is_some()
        {
            return Ok(());
        }
        self.child.kill().await.context("killing the server")
    }

    /// Asks the server to shut down (SIGTERM) and waits until it has exited; kills it
    /// (SIGKILL) if it has not within `grace`. Returns how long it took to exit and whether it
    /// had to be killed.
    pub(super) async fn terminate(mut self, grace: Duration) -> Result<(Duration, bool)> {
        let started = Instant::now();
        if self
            .child
            .try_wait()
            .context("checking on the server")?
            .is_some()
        {
            return Ok((Duration::ZERO, false));
        }
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.pid)?)
            .context("the server has no valid process id")?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .context("sending SIGTERM to the server")?;
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => {
                status.context("waiting for the server to exit")?;
                Ok((started.elapsed(), false))
            }
            Err(_) => {
                self.child.kill().await.context("killing the server")?;
                Ok((started.elapsed(), true))
            }
        }
    }

    /// The last lines of the server's log, to explain a failure.
    pub(super) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        format!("server log {}:\n{tail}", self.log.display())
    }
}
