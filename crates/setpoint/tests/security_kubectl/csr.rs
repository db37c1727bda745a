//! Certificates (issue 19, csr): `setpoint kubeconfig` outputs used by kubectl, and
//! CertificateSigningRequests through `kubectl certificate approve|deny` — signed by the
//! cluster CA and usable as that user, denied, refused (a bad request, a `system:masters`
//! client request), failed by the signer's rules, and node client requests auto-approved.
//! One server (API, the three certificate loops, no agent) serves every check.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use setpoint_testenv::process::{setpoint_binary, Server};

fn start() -> (Server, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &[
            "--no-agent",
            "--controllers=csrsigning,csrapproving,csrcleaner",
        ],
    );
    (server, tmp)
}

fn setpoint_kubeconfig(args: &[&str], data_dir: &Path) -> Output {
    Command::new(setpoint_binary())
        .arg("kubeconfig")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .unwrap()
}

fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> Output {
    crate::common::kubectl_command()
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

/// `kubectl auth whoami` as the user of `kubeconfig`: (name, groups).
fn whoami(kubeconfig: &Path) -> (String, Vec<String>) {
    let out = kubectl_as(kubeconfig, &["auth", "whoami", "-o", "json"]);
    assert!(
        out.status.success(),
        "whoami: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let review: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let info = &review["status"]["userInfo"];
    let groups = info["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(str::to_owned))
        .collect();
    (
        info["username"].as_str().unwrap_or_default().to_owned(),
        groups,
    )
}

/// A new key and a PEM CSR for `cn` in `organization`.
fn request(cn: &str, organization: &str) -> (KeyPair, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, cn);
    name.push(DnType::OrganizationName, organization);
    params.distinguished_name = name;
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    (key, pem)
}

fn csr_yaml(name: &str, pem: &str, signer: &str) -> String {
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: {name}}}\nspec:\n  request: {}\n  signerName: {signer}\n  expirationSeconds: 3600\n  usages: [digital signature, client auth]\n",
        STANDARD.encode(pem)
    )
}

/// Polls `jsonpath` of CSR `name` until `done` holds of it.
fn wait_for(server: &Server, name: &str, jsonpath: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let value = server.ok(&["get", "csr", name, "-o", &format!("jsonpath={jsonpath}")]);
        if done(&value) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "csr {name}: {jsonpath} stayed {value:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stdin(server: &Server, args: &[&str], input: &str) -> Output {
    server.kubectl_stdin(args, input)
}

#[test]
fn kubeconfigs_and_signing_requests_should_give_working_identities() {
    let (server, tmp) = start();
    let data = &server.dir;

    // `setpoint kubeconfig user`: a certificate with every group, that kubectl uses.
    let jane = tmp.path().join("jane.kubeconfig");
    let out = setpoint_kubeconfig(
        &[
            "user",
            "jane",
            "--group",
            "dev",
            "--group",
            "ops",
            "-o",
            jane.to_str().unwrap(),
        ],
        data,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (name, groups) = whoami(&jane);
    assert_eq!(name, "jane");
    assert!(
        groups.iter().any(|g| g == "dev") && groups.iter().any(|g| g == "ops"),
        "{groups:?}"
    );
    // `setpoint kubeconfig node`: the node's identity, to standard output.
    let out = setpoint_kubeconfig(&["node", "n1"], data);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = tmp.path().join("n1.kubeconfig");
    std::fs::write(&node, &out.stdout).unwrap();
    let (name, groups) = whoami(&node);
    assert_eq!(name, "system:node:n1");
    assert!(groups.iter().any(|g| g == "system:nodes"), "{groups:?}");
    // Clear errors.
    let out = setpoint_kubeconfig(&["node", "Bad_Name"], data);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid node name"));
    let out = setpoint_kubeconfig(&["user", "x"], &tmp.path().join("nowhere"));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no cluster CA"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A client request approved with kubectl: signed, and usable as that user.
    let (alice_key, alice_pem) = request("alice", "qa");
    let signer = "kubernetes.io/kube-apiserver-client";
    let out = stdin(
        &server,
        &["create", "-f", "-"],
        &csr_yaml("alice", &alice_pem, signer),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        server.ok(&["get", "csr", "alice", "-o", "jsonpath={.spec.username}"]),
        "setpoint-admin"
    );
    // Another one denied.
    let (_, bob_pem) = request("bob", "qa");
    let out = stdin(
        &server,
        &["create", "-f", "-"],
        &csr_yaml("bob", &bob_pem, signer),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.ok(&["certificate", "deny", "bob"]);
    server.ok(&["certificate", "approve", "alice"]);
    let certificate = wait_for(&server, "alice", "{.status.certificate}", |c| !c.is_empty());
    let row = server.ok(&["get", "csr", "alice"]);
    assert!(row.contains("Approved,Issued"), "{row}");
    let ca = server.ok(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ]);
    let url = server.ok(&[
        "config",
        "view",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    let alice = tmp.path().join("alice.kubeconfig");
    std::fs::write(
        &alice,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{url}\", certificate-authority-data: {ca}}}\nusers:\n- name: alice\n  user: {{client-certificate-data: {certificate}, client-key-data: {}}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: alice}}\ncurrent-context: c\n",
            STANDARD.encode(alice_key.serialize_pem())
        ),
    )
    .unwrap();
    let (name, groups) = whoami(&alice);
    assert_eq!(name, "alice");
    assert!(groups.iter().any(|g| g == "qa"), "{groups:?}");
    // The denied one is never signed; the condition cannot be taken back through approval.
    assert_eq!(
        server.ok(&[
            "get",
            "csr",
            "bob",
            "-o",
            "jsonpath={.status.conditions[0].type}"
        ]),
        "Denied"
    );
    assert_eq!(
        server.ok(&["get", "csr", "bob", "-o", "jsonpath={.status.certificate}"]),
        ""
    );

    // Refused: a request that is not a signed CSR (422), a system:masters client one (403).
    let garbage = csr_yaml(
        "bad",
        "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n",
        signer,
    );
    let out = stdin(&server, &["create", "-f", "-"], &garbage);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is invalid") && err.contains("spec.request"),
        "{err}"
    );
    let (_, masters) = request("mallory", "system:masters");
    let out = stdin(
        &server,
        &["create", "-f", "-"],
        &csr_yaml("mallory", &masters, signer),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is forbidden") && err.contains("system:masters"),
        "{err}"
    );

    // A node client request its requester may make is approved by the loop and signed.
    let kubelet = "kubernetes.io/kube-apiserver-client-kubelet";
    let (_, node_pem) = request("system:node:n2", "system:nodes");
    let out = stdin(
        &server,
        &["create", "-f", "-"],
        &csr_yaml("node-n2", &node_pem, kubelet),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(&server, "node-n2", "{.status.certificate}", |c| {
        !c.is_empty()
    });
    assert_eq!(
        server.ok(&[
            "get",
            "csr",
            "node-n2",
            "-o",
            "jsonpath={.status.conditions[0].reason}"
        ]),
        "AutoApproved"
    );
    // One that breaks the kubelet signer's rules is approved by hand and fails.
    let (_, carol_pem) = request("carol", "system:nodes");
    let out = stdin(
        &server,
        &["create", "-f", "-"],
        &csr_yaml("carol", &carol_pem, kubelet),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.ok(&["certificate", "approve", "carol"]);
    let types = wait_for(&server, "carol", "{.status.conditions[*].type}", |t| {
        t.contains("Failed")
    });
    assert!(types.contains("Approved"), "{types}");
    assert_eq!(
        server.ok(&[
            "get",
            "csr",
            "carol",
            "-o",
            "jsonpath={.status.certificate}"
        ]),
        ""
    );
}

/// The token kubeconfig authenticates only once the server reads `pki/tokens.csv` (the authn
/// part of issue 19); until then the file and the kubeconfig are checked, not the login.
#[test]
fn a_token_kubeconfig_should_be_written_with_its_token_file_line() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--controllers="],
    );
    let out = setpoint_kubeconfig(&["user", "tom", "--token", "--group", "dev"], &server.dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kubeconfig = tmp.path().join("tom.kubeconfig");
    std::fs::write(&kubeconfig, &out.stdout).unwrap();
    let token = String::from_utf8(
        kubectl_as(
            &kubeconfig,
            &[
                "config",
                "view",
                "--raw",
                "-o",
                "jsonpath={.users[0].user.token}",
            ],
        )
        .stdout,
    )
    .unwrap();
    assert!(token.len() >= 32, "{token:?}");
    let file = server.dir.join("pki/tokens.csv");
    let text = std::fs::read_to_string(&file).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{token},")))
        .unwrap();
    assert!(
        line.starts_with(&format!("{token},tom,")) && line.ends_with(",\"dev\""),
        "{line}"
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The server reads the token file again when it changes: the token works at once.
    assert_eq!(whoami(&kubeconfig).0, "tom");
}
