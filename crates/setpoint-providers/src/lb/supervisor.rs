//! The balancer processes: one `setpoint lb-proxy --config FILE` per LoadBalancer Service, in
//! its own process group, with its files in `<providers dir>/lb/<namespace>_<name>/`
//! (`config.json`, its state `config.json.state`, `pid`, `balancer.log` for its stderr).
//!
//! A balancer is running when its pid file names a live process whose command line holds its
//! configuration file's path (a recycled pid is not mistaken for it). A balancer this loop
//! started is waited for: when it exits, its Service is enqueued at once (a killed balancer
//! is restarted by the next reconcile); one left by an earlier run of the loop (a crash) is
//! adopted through its pid file and noticed by the periodic observation instead. A graceful
//! shutdown of the loop stops every balancer ([`Supervisor::stop_all`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use setpoint_runtime::{Enqueuer, ObjectKey};

use crate::lb::config::{state_path, write_atomically, ProxyState};

/// How long a stopped balancer gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Starts, finds, signals and stops balancer processes.
pub(crate) struct Supervisor {
    /// `<providers dir>/lb`.
    root: PathBuf,
    /// The argv before `--config FILE`.
    command: Vec<String>,
    /// The balancers this loop started and still waits for, by Service.
    children: Arc<Mutex<HashMap<ObjectKey, u32>>>,
    /// Where an exited balancer's Service is enqueued (set once the controller runs).
    pub(crate) on_exit: Arc<OnceLock<Enqueuer<ObjectKey>>>,
}

impl Supervisor {
    /// Balancers under `root`, run with `command` (`[setpoint, lb-proxy]`).
    pub(crate) fn new(root: PathBuf, command: Vec<String>) -> Supervisor {
        Supervisor {
            root,
            command,
            children: Arc::default(),
            on_exit: Arc::default(),
        }
    }

    /// The directory of `key`'s balancer.
    pub(crate) fn dir(&self, key: &ObjectKey) -> PathBuf {
        let namespace = key.namespace.as_deref().unwrap_or("_");
        self.root.join(format!("{namespace}_{}", key.name))
    }

    /// The configuration file of `key`'s balancer.
    pub(crate) fn config_path(&self, key: &ObjectKey) -> PathBuf {
        self.dir(key).join("config.json")
    }

    /// The pid of `key`'s running balancer.
    pub(crate) fn running(&self, key: &ObjectKey) -> Option<u32> {
        let dir = self.dir(key);
        let pid: u32 = std::fs::read_to_string(dir.join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        is_balancer(pid, &dir.join("config.json")).then_some(pid)
    }

    /// Writes `key`'s configuration and makes its balancer re-read it now (SIGHUP); starts
    /// the balancer when none runs. Returns its pid.
    pub(crate) async fn apply(&self, key: &ObjectKey, config: &[u8]) -> std::io::Result<u32> {
        let dir = self.dir(key);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("config.json");
        write_atomically(&path, config)?;
        if let Some(pid) = self.running(key) {
            // Only a balancer that has reported its state listens for SIGHUP (before, the
            // signal would end it); one still starting reads the file within 250 ms anyway.
            let state: Option<ProxyState> = std::fs::read(state_path(&path))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            if state.is_some_and(|s| s.pid == pid) {
                signal(pid, Signal::HUP);
            }
            return Ok(pid);
        }
        let pid = self.spawn(key, &dir, &path)?;
        // The parent resumes before the new program's arguments show in /proc/PID/cmdline:
        // wait until they do, so the balancer is seen running from now on.
        let deadline = Instant::now() + STOP_GRACE;
        while !is_balancer(pid, &path) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(pid)
    }

    fn spawn(&self, key: &ObjectKey, dir: &Path, config: &Path) -> std::io::Result<u32> {
        let Some((program, args)) = self.command.split_first() else {
            return Err(std::io::Error::other("no balancer command"));
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("balancer.log"))?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .kill_on_drop(false)
            .spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| std::io::Error::other("the balancer exited at once"))?;
        write_atomically(&dir.join("pid"), format!("{pid}\n").as_bytes())?;
        self.children.lock().insert(key.clone(), pid);
        tracing::info!(service = %key, pid, "balancer started");
        let children = Arc::clone(&self.children);
        let on_exit = Arc::clone(&self.on_exit);
        let key = key.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let mine = {
                let mut children = children.lock();
                let mine = children.get(&key) == Some(&pid);
                if mine {
                    children.remove(&key);
                }
                mine
            };
            tracing::info!(service = %key, pid, ?status, "balancer exited");
            if mine {
                if let Some(enqueuer) = on_exit.get() {
                    enqueuer.add(key);
                }
            }
        });
        Ok(pid)
    }

    /// Stops `key`'s balancer (SIGTERM, SIGKILL after a grace period) and removes its files.
    pub(crate) async fn stop(&self, key: &ObjectKey) {
        let child = self.children.lock().remove(key);
        if let Some(pid) = child.or_else(|| self.running(key)) {
            signal_group(pid, Signal::TERM);
            let config = self.config_path(key);
            let deadline = Instant::now() + STOP_GRACE;
            while is_balancer(pid, &config) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if is_balancer(pid, &config) {
                signal_group(pid, Signal::KILL);
            }
            tracing::info!(service = %key, pid, "balancer stopped");
        }
        // A balancer that was killed (or died) could not delete its kernel table.
        let config = self.config_path(key);
        let _ =
            tokio::task::spawn_blocking(move || crate::lb::proxy::kernel::remove_table(&config))
                .await;
        let _ = std::fs::remove_dir_all(self.dir(key));
    }

    /// Stops every balancer under the root (the loop is shutting down gracefully); their
    /// files stay, so the next start finds the addresses in the Services' status.
    pub(crate) fn stop_all(&self) {
        self.children.lock().clear();
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            let pid = std::fs::read_to_string(dir.join("pid"))
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok());
            if let Some(pid) = pid.filter(|pid| is_balancer(*pid, &dir.join("config.json"))) {
                signal_group(pid, Signal::TERM);
                let _ = std::fs::remove_file(dir.join("pid"));
            }
        }
    }
}

/// Whether `pid` is a live (not zombie) balancer of `config`.
fn is_balancer(pid: u32, config: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = config.as_os_str().as_encoded_bytes();
    let holds = cmdline.split(|b| *b == 0).any(|arg| arg == needle);
    // A zombie's cmdline is empty; its state letter is Z.
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true);
    holds && !zombie
}

fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process(pid, signal);
    }
}

/// Signals the process group a balancer leads (it was started as its own group).
fn signal_group(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process_group(pid, signal);
    }
}

#[cfg(test)]
mod tests {
    use setpoint_runtime::WorkQueue;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_balancer_should_enqueue_its_service_and_a_stopped_one_be_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A stand-in balancer: `sh -c 'sleep 30; :' lb-proxy --config FILE` holds FILE in its
        // command line as the real one does (the `:` keeps sh from exec-ing sleep).
        let command = ["sh", "-c", "sleep 30; :", "lb-proxy"]
            .map(str::to_owned)
            .to_vec();
        let supervisor = Supervisor::new(dir.path().join("lb"), command);
        let queue = WorkQueue::<ObjectKey>::new();
        let _ = supervisor.on_exit.set(queue.enqueuer());
        let key = ObjectKey::namespaced("default", "web");

        assert_eq!(supervisor.running(&key), None);
        let pid = supervisor.apply(&key, b"{}").await.expect("started");
        assert_eq!(supervisor.running(&key), Some(pid));
        assert_eq!(
            supervisor.apply(&key, b"{}").await.expect("applied"),
            pid,
            "a running balancer is reloaded, not started again"
        );

        signal_group(pid, Signal::KILL);
        let claim = tokio::time::timeout(Duration::from_secs(20), queue.next())
            .await
            .expect("enqueued when it died")
            .expect("a key");
        assert_eq!(claim.key(), &key);
        claim.done();
        assert_eq!(supervisor.running(&key), None, "a dead pid is not running");

        let pid = supervisor.apply(&key, b"{}").await.expect("restarted");
        supervisor.stop(&key).await;

        assert_eq!(supervisor.running(&key), None);
        assert!(!is_balancer(pid, &supervisor.config_path(&key)));
        assert!(!supervisor.dir(&key).exists(), "its files are removed");
    }
}
