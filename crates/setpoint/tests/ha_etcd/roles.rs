//! Roles without the API server need a kubeconfig; unknown roles are refused.

use super::*;

#[test]
fn roles_without_the_apiserver_should_ask_for_a_kubeconfig_and_unknown_roles_be_refused() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .arg("server")
            .args(args)
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "setpoint server {args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&["--roles", "controllers,scheduler"]);
    assert!(err.contains("--kubeconfig"), "{err}");
    let err = run(&["--roles", "apiserver,kubelet", "--data-dir", "/nonexistent"]);
    assert!(err.contains("unknown role \"kubelet\""), "{err}");
    let err = run(&["--roles", "apiserver"]);
    assert!(err.contains("--data-dir"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let err = run(&[
        "--roles",
        "controllers",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--data-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}
