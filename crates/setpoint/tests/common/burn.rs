//! The CPU-burning Deployment the autoscaler tests scale, and how they watch it: `kubectl`
//! output polled until it satisfies a check (its processes: [`super::processes`]).

use std::time::{Duration, Instant};

use super::Server;

pub fn deployment(marker: &str, stop: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: burn}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: burn}}}}
  template:
    metadata: {{labels: {{app: burn}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: spin
        image: busybox
        resources: {{requests: {{cpu: 100m}}}}
        command: ["sh", "-c", "while [ ! -e {stop} ]; do :; done; exec sleep 1000 # {marker}"]
"#
    )
}

/// Polls `kubectl args` until it succeeds with output satisfying `check`; panics with the last
/// output after 90 s.
pub fn wait_output(s: &Server, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.kubectl(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && check(&stdout) {
            return stdout;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits until the `burn` Deployment's `spec.replicas` is `replicas`.
pub fn wait_burn_replicas(s: &Server, replicas: &str) {
    wait_output(
        s,
        &[
            "get",
            "deployment",
            "burn",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
        |r| r == replicas,
    );
}
