//! A ServiceAccount token works, and stops working when its pod is deleted: a `setpoint
//! server` runs a process pod whose command prints the token the node agent projected into its
//! `kube-api-access-*` volume; kubectl with that token lists the namespace's pods (the
//! ServiceAccount is bound to `view` there, so the check holds with RBAC on); once the pod is
//! deleted the same call is refused with 401.

use std::time::{Duration, Instant};

use setpoint_testenv::process::{setpoint_binary, Server};

const NS: &str = "satokens";

/// Stops the data directory's pods when the test ends, even if it failed.
struct StopPods(std::path::PathBuf);

impl Drop for StopPods {
    fn drop(&mut self) {
        let _ = std::process::Command::new(setpoint_binary())
            .args(["agent", "cleanup", "--grace-period", "0s", "--data-dir"])
            .arg(&self.0)
            .stdout(std::process::Stdio::null())
            .status();
    }
}

/// Polls `f` (every 200 ms, 90 s at most) until it gives a value.
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: reader
  namespace: satokens
spec:
  serviceAccountName: reader
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c"]
    args:
    - cat "$SETPOINT_MOUNT_VAR_RUN_SECRETS_KUBERNETES_IO_SERVICEACCOUNT/token" || cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; exec sleep 3600
"#;

#[test]
fn a_pods_service_account_token_should_work_until_the_pod_is_deleted() {
    let s = Server::start();
    let _stop = StopPods(s.dir.clone());
    s.ok(&["create", "namespace", NS]);
    s.ok(&["create", "serviceaccount", "reader", "-n", NS]);
    s.ok(&[
        "create",
        "rolebinding",
        "reader-view",
        "--clusterrole=view",
        &format!("--serviceaccount={NS}:reader"),
        "-n",
        NS,
    ]);
    let out = s.kubectl_stdin(&["apply", "-f", "-"], POD);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mounted = s.ok(&[
        "get",
        "pod",
        "reader",
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.containers[0].volumeMounts[0].mountPath}",
    ]);
    assert_eq!(mounted, "/var/run/secrets/kubernetes.io/serviceaccount");

    let token = eventually("the pod to print its token", || {
        let out = s.kubectl(&["logs", "reader", "-n", NS]);
        let log = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        // A JWT: three base64url parts.
        (out.status.success() && log.split('.').count() == 3).then_some(log)
    });
    let with_token = |args: &[&str]| {
        let mut all = vec!["--token", token.as_str()];
        all.extend_from_slice(args);
        s.kubectl(&all)
    };
    let listed = with_token(&["get", "pods", "-n", NS, "-o", "name"]);
    assert!(
        listed.status.success(),
        "the pod's token {token:?} was refused: {}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "pod/reader");

    s.ok(&["delete", "pod", "reader", "-n", NS, "--wait=true"]);
    let refused = eventually("the token to be refused", || {
        let out = with_token(&["get", "pods", "-n", NS]);
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    });
    assert!(
        refused.contains("Unauthorized") || refused.contains("must be logged in"),
        "{refused}"
    );
}
