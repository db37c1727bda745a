//! The real kubectl, given nothing but the admin kubeconfig the server wrote, reaches the
//! server over TLS and authenticates, with the token (the default context) and with the client
//! certificate (context `setpoint-cert`).

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{TestServer, VERSION_JSON};

/// Runs `kubectl --kubeconfig KUBECONFIG ARGS...` with a scratch HOME, and returns its stdout.
async fn kubectl(kubeconfig: &Path, home: &Path, args: &[&str]) -> String {
    let mut command = tokio::process::Command::new(setpoint_testenv::kubectl::kubectl_program());
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("kubectl finished within 60 s")
        .expect("kubectl is on PATH");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed ({}):\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_should_get_version_with_the_admin_kubeconfig() {
    let server = TestServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = server.server.kubeconfig_path().to_owned();

    let out = kubectl(&kubeconfig, home.path(), &["get", "--raw", "/version"]).await;
    assert_eq!(out.trim(), VERSION_JSON);

    let out = kubectl(
        &kubeconfig,
        home.path(),
        &["--context", "setpoint-cert", "get", "--raw", "/whoami"],
    )
    .await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["setpoint-admin", "system:masters", "system:authenticated"]
    );

    let out = kubectl(
        &kubeconfig,
        home.path(),
        &["get", "--raw", "/readyz?verbose"],
    )
    .await;
    assert!(out.contains("readyz check passed"), "{out}");

    server.server.shutdown().await.unwrap();
}
