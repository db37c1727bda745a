//! Certificates end to end: `setpoint server` (its `cert-manager` loop) and the real kubectl
//! apply `examples/certificates/` (a self-signed Issuer and root CA, a CA Issuer, a serving
//! Certificate and an RSA client Certificate); `kubectl wait --for=condition=Ready` on them;
//! the client key is PKCS#1; a pod (a real
//! process) mounting the Secret as a volume prints `tls.crt`, which is the Secret's.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use setpoint_testenv::process::Server;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/certificates")
}

/// Polls `kubectl args` (90 s at most) until its output satisfies `check`; returns it.
fn wait_for(s: &Server, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.kubectl(args);
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && check(&got) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?}: {got:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Stops the data directory's pods and removes their network when dropped (after the server,
/// and even when the test failed).
struct AgentCleanup(PathBuf);

impl Drop for AgentCleanup {
    fn drop(&mut self) {
        let _ = std::process::Command::new(setpoint_testenv::process::setpoint_binary())
            .args(["agent", "cleanup", "--grace-period", "0s", "--data-dir"])
            .arg(&self.0)
            .stdout(std::process::Stdio::null())
            .status();
    }
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: reads-tls}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: cat
    image: busybox
    # In a mount namespace the volume is at its mountPath; without the privilege to mount,
    # the agent names its host directory in SETPOINT_MOUNT_ETC_TLS.
    command: ["sh", "-c", "cat \"${SETPOINT_MOUNT_ETC_TLS:-/etc/tls}/tls.crt\""]
    volumeMounts:
    - {name: tls, mountPath: /etc/tls, readOnly: true}
  volumes:
  - name: tls
    secret: {secretName: web-tls}
"#;

#[test]
fn the_example_certificates_become_ready_and_a_pod_reads_the_secret() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let data = tmp.path().join("data");
    let _cleanup = AgentCleanup(data.clone());
    let s = Server::start_in(&data);
    // The loop installs the CRDs when it starts: apply once all four are served.
    wait_for(
        &s,
        &[
            "get",
            "issuers,clusterissuers,certificates,certificaterequests",
        ],
        |_| true,
    );
    let dir = examples();
    wait_for(
        &s,
        &["apply", "-f", dir.to_str().expect("utf-8 path")],
        |_| true,
    );
    s.ok(&[
        "wait",
        "--for=condition=Ready",
        "certificate/web",
        "certificate/client",
        "certificate/example-root-ca",
        "issuer/example-ca",
        "--timeout=90s",
    ]);
    let crt = s.ok(&[
        "get",
        "secret",
        "web-tls",
        "-o",
        r"jsonpath={.data.tls\.crt}",
    ]);
    assert!(!crt.is_empty(), "the Secret holds tls.crt");
    let revision = s.ok(&[
        "get",
        "certificate",
        "web",
        "-o",
        "jsonpath={.status.revision}",
    ]);
    assert_eq!(revision, "1");
    // The client certificate's key is RSA, PKCS#1, as it asks.
    let key = s.ok(&[
        "get",
        "secret",
        "client-tls",
        "-o",
        r"jsonpath={.data.tls\.key}",
    ]);
    let key = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(key)
            .expect("base64")
    };
    assert!(
        key.starts_with(b"-----BEGIN RSA PRIVATE KEY-----"),
        "{}",
        String::from_utf8_lossy(&key)
    );
    let requests = s.ok(&["get", "certificaterequests", "-o", "name"]);
    assert!(
        requests.contains("certificaterequest.cert-manager.io/web-1"),
        "{requests}"
    );

    s.kubectl_stdin(&["apply", "-f", "-"], POD);
    wait_for(
        &s,
        &["get", "pod", "reads-tls", "-o", "jsonpath={.status.phase}"],
        |phase| phase == "Succeeded",
    );
    let printed = s.ok(&["logs", "reads-tls"]);
    let secret = s.ok(&["get", "secret", "web-tls", "-o", "json"]);
    let secret: serde_json::Value = serde_json::from_str(&secret).expect("json");
    let encoded = secret["data"]["tls.crt"].as_str().expect("tls.crt");
    let decoded = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64")
    };
    assert_eq!(
        printed.as_bytes(),
        decoded.as_slice(),
        "the pod read the Secret's tls.crt"
    );
    assert!(printed.starts_with("-----BEGIN CERTIFICATE-----"));
    s.ok(&["delete", "pod", "reads-tls", "--wait=true"]);
}
