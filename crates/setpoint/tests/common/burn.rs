//! The CPU-burning Deployment the autoscaler tests scale, and how they watch it: its processes
//! on this machine, and `kubectl` output polled until it satisfies a check.

use std::process::Command;
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

/// Kills what a failed test may have left: the marked containers and the agent's shims.
pub struct Cleanup {
    pub marker: String,
    pub agent_root: String,
}

pub fn processes_with(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains(needle))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let mut pids = processes_with(&self.marker);
        pids.extend(processes_with("agent-shim").into_iter().filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&self.agent_root))
        }));
        for pid in pids {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
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
