//! A `setpoint server` process started for a test on a free loopback port, with `kubectl`
//! pointed at it; stopped (SIGKILL) when dropped — and then, if the server owns its data
//! directory, what its pods still run is stopped too (`setpoint agent cleanup`). With
//! `SETPOINT_TEST_STORE=etcd` in the environment (and the `etcd` feature), a server started
//! without a `--store` flag runs on a fresh local etcd member of its own instead of the
//! embedded store (`SETPOINT_TEST_STORE=etcd cargo test -p setpoint --features etcd --test
//! kubectl_basics` runs those scenarios on etcd).
//!
//! The binary is the `setpoint` that cargo built beside the running test (`target/<profile>/`),
//! or the one `SETPOINT_BIN` names. Every method panics on failure: these are test helpers.

#![allow(clippy::unwrap_used)] // test support: a failure should panic with the error

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running server.
pub struct Server {
    child: Option<Child>,
    /// The server's data directory.
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    /// The etcd member of a server started with `SETPOINT_TEST_STORE=etcd`, stopped after it.
    _etcd: Option<Box<dyn std::any::Any>>,
}

impl Server {
    /// Starts a server on a fresh data directory.
    pub fn start() -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut s = Server::start_in(&dir);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server on a fresh data directory with no built-in loop and no node agent: the
    /// API alone, for tests of API semantics that a controller writing to the same objects
    /// (a Deployment's status, say) would race with.
    pub fn start_api_only() -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut s = Server::start_with(&dir, "127.0.0.1:0", &["--no-agent", "--controllers="]);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server on a fresh data directory of its own with more flags; dropping it stops
    /// what its pods run and removes its pod network, as [`Server::start`] does (a test that
    /// owns the directory itself must clean up after a SIGKILLed server: a leaked bridge keeps
    /// the pod range, and later servers fall back to the host's network).
    pub fn start_fresh_with(extra_args: &[&str]) -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut s = Server::start_with(&dir, "127.0.0.1:0", extra_args);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server on `dir` (which may hold an earlier server's data).
    pub fn start_in(dir: &Path) -> Server {
        Server::start_with(dir, "127.0.0.1:0", &[])
    }

    /// Starts a server on `dir` listening on `listen`, with more flags.
    pub fn start_with(dir: &Path, listen: &str, extra_args: &[&str]) -> Server {
        let kubeconfig = dir.join("admin.kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let (etcd, etcd_args) = etcd_for_test(extra_args);
        let spawn = || {
            Command::new(setpoint_binary())
                .args(["server", "--data-dir"])
                .arg(dir)
                .args(["--listen", listen])
                .args(extra_args)
                .args(&etcd_args)
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        };
        let mut server = Server {
            child: Some(spawn()),
            dir: dir.to_owned(),
            _tmp: None,
            _etcd: etcd,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if kubeconfig.exists() {
                let out = server.kubectl(&["get", "--raw", "/readyz"]);
                if out.status.success() {
                    return server;
                }
            }
            assert!(Instant::now() < deadline, "the server did not become ready");
            // A server restarted on the directory of one just killed can find the store still
            // locked for a moment (by a process that inherited the lock as it was being
            // started, before it ran its program); it exits saying so, and is started again.
            let exited = server
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                eprintln!(
                    "setpoint server exited before it was ready ({status}); starting it again"
                );
                std::thread::sleep(Duration::from_millis(250));
                server.child = Some(spawn());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// A `kubectl` command ([`crate::kubectl::kubectl_program`]) pointed at the server, for the caller to add
    /// arguments, pipes or environment to: a `kubectl get -w` read line by line, say.
    pub fn kubectl_command(&self) -> Command {
        let mut command = crate::kubectl::kubectl_command();
        command.arg("--kubeconfig").arg(self.kubeconfig());
        command
    }

    /// Runs `kubectl` ([`crate::kubectl::kubectl_program`]) against the server.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        crate::kubectl::kubectl_command()
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `kubectl` with `stdin` as standard input.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = crate::kubectl::kubectl_command()
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs `kubectl` and returns its standard output, failing the test if it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `kubectl`, expecting it to fail; returns its standard error.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    /// A `kube` client configured from the server's admin kubeconfig (CA and bearer token).
    /// Needs a tokio runtime.
    pub async fn kube_client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The `https://` address the server's admin kubeconfig names.
    pub fn url(&self) -> String {
        let text = std::fs::read_to_string(self.kubeconfig()).unwrap();
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("server:"))
            .expect("a server line in the kubeconfig");
        line.trim_start()["server:".len()..]
            .trim()
            .trim_matches('"')
            .to_owned()
    }

    /// Kills the server with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if self._tmp.is_some() {
            // The data directory goes with this server: stop what its pods still run (and
            // remove their cgroups), as a user should before deleting a data directory.
            let _ = Command::new(setpoint_binary())
                .args(["agent", "cleanup", "--grace-period", "0s", "--data-dir"])
                .arg(&self.dir)
                .stdout(Stdio::null())
                .status();
        }
    }
}

/// The `setpoint` binary: `SETPOINT_BIN`, or `setpoint` in the directory above the running
/// test's (`target/debug/deps/<test>` → `target/debug/setpoint`), where cargo puts the binaries
/// of the package whose integration tests it runs.
pub fn setpoint_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("SETPOINT_BIN") {
        return PathBuf::from(bin);
    }
    let test = std::env::current_exe().unwrap();
    let deps = test.parent().expect("the test's directory");
    let profile = deps.parent().expect("the profile's directory");
    profile.join(format!("setpoint{}", std::env::consts::EXE_SUFFIX))
}

/// With `SETPOINT_TEST_STORE=etcd` and no `--store` among `extra_args`: a fresh local etcd
/// member and the flags that put the server on it.
#[cfg(feature = "etcd")]
fn etcd_for_test(extra_args: &[&str]) -> (Option<Box<dyn std::any::Any>>, Vec<String>) {
    let wanted = std::env::var("SETPOINT_TEST_STORE").is_ok_and(|s| s == "etcd");
    if !wanted || extra_args.contains(&"--store") {
        return (None, Vec::new());
    }
    let etcd = setpoint_store::LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"));
    let args = vec![
        "--store".to_owned(),
        "etcd".to_owned(),
        "--etcd-endpoints".to_owned(),
        etcd.endpoint().to_owned(),
    ];
    (Some(Box::new(etcd)), args)
}

#[cfg(not(feature = "etcd"))]
fn etcd_for_test(_extra_args: &[&str]) -> (Option<Box<dyn std::any::Any>>, Vec<String>) {
    (None, Vec::new())
}

/// A loopback address with a port that was free a moment ago, for a server that must come
/// back on the same address after a restart.
pub fn free_loopback_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}
