//! RBAC with real kubectl: a user with a client certificate of the cluster CA is refused what
//! no binding grants (kube's 403 text), lists what `view` grants, asks `kubectl auth can-i`
//! (and `--list`), and impersonation (`--as`) is authorized by the `impersonate` verb.

use std::path::{Path, PathBuf};

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair};
use setpoint_testenv::process::Server;

/// Writes a kubeconfig for `user` (a client certificate of the server's CA) in `dir`.
fn user_kubeconfig(server: &Server, dir: &Path, user: &str) -> PathBuf {
    let pki = server.dir.join("pki");
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(pki.join("ca.key")).unwrap()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(
        &std::fs::read_to_string(pki.join("ca.crt")).unwrap(),
        ca_key,
    )
    .unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, user);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let certificate = params.signed_by(&key, &issuer).unwrap();
    let (crt, key_path) = (
        dir.join(format!("{user}.crt")),
        dir.join(format!("{user}.key")),
    );
    std::fs::write(&crt, certificate.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let kubeconfig = dir.join(format!("{user}.kubeconfig"));
    let config = |args: &[&str]| {
        let out = crate::common::kubectl_command()
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("config")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ca = format!("--certificate-authority={}", pki.join("ca.crt").display());
    config(&[
        "set-cluster",
        "setpoint",
        &format!("--server={}", server.url()),
        &ca,
    ]);
    let cert_arg = format!("--client-certificate={}", crt.display());
    let key_arg = format!("--client-key={}", key_path.display());
    config(&["set-credentials", user, &cert_arg, &key_arg]);
    config(&[
        "set-context",
        user,
        "--cluster=setpoint",
        &format!("--user={user}"),
    ]);
    config(&["use-context", user]);
    kubeconfig
}

/// Runs kubectl with `kubeconfig`: (success, stdout, stderr).
fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = crate::common::kubectl_command()
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Retries `args` until it succeeds (the authorizer follows the watch caches).
fn eventually_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (ok, stdout, stderr) = kubectl(kubeconfig, args);
        if ok {
            return stdout;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl {args:?}: {stderr}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_view_user_should_list_but_not_create_and_ask_can_i() {
    let server = Server::start_api_only();
    let tmp = tempfile::tempdir().unwrap();
    let jane = user_kubeconfig(&server, tmp.path(), "jane");

    let (ok, _, stderr) = kubectl(&jane, &["get", "pods", "-n", "default"]);
    assert!(!ok);
    assert!(
        stderr.contains(r#"Error from server (Forbidden): pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "default""#),
        "{stderr}"
    );
    server.ok(&[
        "create",
        "rolebinding",
        "jane-view",
        "--clusterrole=view",
        "--user=jane",
        "-n",
        "default",
    ]);
    eventually_ok(&jane, &["get", "pods", "-n", "default"]);
    let (ok, _, stderr) = kubectl(&jane, &["create", "configmap", "c", "-n", "default"]);
    assert!(!ok);
    assert!(
        stderr.contains(r#"configmaps is forbidden: User "jane" cannot create resource "configmaps" in API group "" in the namespace "default""#),
        "{stderr}"
    );

    // kubectl auth can-i: a SelfSubjectAccessReview, and --list a SelfSubjectRulesReview.
    let (ok, stdout, _) = kubectl(&jane, &["auth", "can-i", "list", "pods", "-n", "default"]);
    assert!(ok && stdout.trim() == "yes", "{stdout}");
    let (ok, stdout, _) = kubectl(&jane, &["auth", "can-i", "create", "pods", "-n", "default"]);
    assert!(!ok && stdout.trim() == "no", "{stdout}");
    let (ok, stdout, _) = kubectl(&jane, &["auth", "can-i", "get", "secrets", "-n", "default"]);
    assert!(!ok && stdout.trim() == "no", "{stdout}");
    let list = eventually_ok(&jane, &["auth", "can-i", "--list", "-n", "default"]);
    let pods = list
        .lines()
        .find(|l| l.starts_with("pods "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(pods.contains("[get list watch]"), "{pods}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io")),
        "{list}"
    );
    assert!(!list.lines().any(|l| l.starts_with("secrets ")), "{list}");

    // The admin (system:masters) may impersonate; jane may not.
    let admin = server.kubeconfig();
    let (ok, stdout, _) = kubectl(
        &admin,
        &[
            "auth",
            "can-i",
            "list",
            "pods",
            "-n",
            "default",
            "--as=jane",
        ],
    );
    assert!(ok && stdout.trim() == "yes", "{stdout}");
    let (ok, stdout, _) = kubectl(
        &admin,
        &[
            "auth",
            "can-i",
            "list",
            "secrets",
            "-n",
            "default",
            "--as=jane",
        ],
    );
    assert!(!ok && stdout.trim() == "no", "{stdout}");
    let (ok, _, stderr) = kubectl(&admin, &["get", "secrets", "-n", "default", "--as=jane"]);
    assert!(
        !ok && stderr.contains(r#"User "jane" cannot list resource "secrets""#),
        "{stderr}"
    );
    assert!(kubectl(&admin, &["get", "pods", "-n", "default", "--as=jane"]).0);
    let (ok, _, stderr) = kubectl(
        &jane,
        &["get", "pods", "-n", "default", "--as=setpoint-admin"],
    );
    assert!(!ok);
    assert!(
        stderr.contains(r#"users "setpoint-admin" is forbidden: User "jane" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{stderr}"
    );
}
