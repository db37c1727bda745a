//! Helpers the modules of `pods_kubectl` share: root detection, waiting on kubectl output, and
//! stopping a data directory's pods when a test ends.

use std::time::{Duration, Instant};

use crate::common::Server;

/// Whether the test runs as root (network namespaces, nftables, cgroups).
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

/// Waits (90 s at most) until `kubectl args` succeeds printing something `check` accepts;
/// returns it, trimmed.
pub(crate) fn wait_kubectl(s: &Server, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.kubectl(args);
        let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && check(&got) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?} printed {got:?}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Stops the pods of a data directory and removes their network and Service table
/// (`setpoint agent cleanup`) when dropped, even if the test failed: `Server::start_with`
/// leaves its data directory's pods to the caller.
pub(crate) struct AgentCleanup(pub(crate) std::path::PathBuf);

impl Drop for AgentCleanup {
    fn drop(&mut self) {
        let _ = std::process::Command::new(setpoint_testenv::process::setpoint_binary())
            .args(["agent", "cleanup", "--grace-period", "0s", "--data-dir"])
            .arg(&self.0)
            .stdout(std::process::Stdio::null())
            .status();
    }
}
