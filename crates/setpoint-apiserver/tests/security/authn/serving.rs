//! An `Api` on a memory store served over HTTPS in a temporary data directory, and kubectl
//! pointed at it with the admin kubeconfig (optionally with another `--token`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use setpoint_apiserver::{serve, Api, AuthenticationConfig, RunningServer, TransportConfig};
use setpoint_store::{EmbeddedConfig, EmbeddedStore};
use tokio_util::sync::CancellationToken;

pub(crate) struct Served {
    pub(crate) server: Option<RunningServer>,
    pub(crate) data_dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

/// What one kubectl run printed.
pub(crate) struct Output {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Served {
    pub(crate) async fn start(config: AuthenticationConfig) -> Self {
        let store = EmbeddedStore::open(EmbeddedConfig::in_memory()).unwrap();
        let api = Api::new(Arc::new(store)).await.unwrap();
        api.set_authentication(config);
        let data_dir = tempfile::tempdir().unwrap();
        let transport = TransportConfig::new(data_dir.path(), "127.0.0.1:0".parse().unwrap());
        let server = serve(transport, api, CancellationToken::new())
            .await
            .unwrap();
        Self {
            server: Some(server),
            data_dir,
            home: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn pki(&self) -> PathBuf {
        self.data_dir.path().join("pki")
    }

    fn kubeconfig(&self) -> &Path {
        self.server.as_ref().unwrap().kubeconfig_path()
    }

    /// Runs kubectl as the admin (or with `token` instead), feeding `stdin`.
    pub(crate) async fn run(
        &self,
        token: Option<&str>,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Output {
        let mut command =
            tokio::process::Command::new(setpoint_testenv::kubectl::kubectl_program());
        command.arg("--kubeconfig").arg(self.kubeconfig());
        if let Some(token) = token {
            command.arg("--token").arg(token);
        }
        command
            .args(args)
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("kubectl is on PATH");
        if let Some(stdin) = stdin {
            use tokio::io::AsyncWriteExt as _;
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(stdin.as_bytes()).await.unwrap();
        }
        drop(child.stdin.take());
        let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finished within 60 s")
            .unwrap();
        Output {
            ok: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs kubectl as the admin; it must succeed; returns its stdout.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(None, args, None).await;
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    /// Applies (creates) a manifest as the admin.
    pub(crate) async fn create(&self, manifest: &Value) -> Value {
        let text = manifest.to_string();
        let out = self
            .run(None, &["create", "-o", "json", "-f", "-"], Some(&text))
            .await;
        assert!(out.ok, "creating {manifest} failed: {}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// `kubectl auth whoami -o json` with `token`: the status's `userInfo`, or `None` when the
    /// token is refused (401).
    pub(crate) async fn whoami(&self, token: &str) -> Option<Value> {
        let out = self
            .run(Some(token), &["auth", "whoami", "-o", "json"], None)
            .await;
        if !out.ok {
            assert!(out.stderr.contains("Unauthorized"), "{}", out.stderr);
            return None;
        }
        let review: Value = serde_json::from_str(&out.stdout).unwrap();
        Some(review["status"]["userInfo"].clone())
    }

    /// Waits until `token` is refused.
    pub(crate) async fn until_refused(&self, token: &str, what: &str) {
        for _ in 0..100 {
            if self.whoami(token).await.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: the token was still accepted after 10 s");
    }

    pub(crate) async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.unwrap();
        }
    }
}
