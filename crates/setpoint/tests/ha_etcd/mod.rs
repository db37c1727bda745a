//! Several `setpoint server` processes on one etcd, driven by the real `kubectl`: they share the
//! cluster's credentials (the second server's `pki` copied from the first), serve the same
//! objects, and a write through one reaches the other's watchers in order; the controllers and
//! the scheduler act in one process at a time (their Leases), and when that process is killed
//! the other takes the Leases over and a Deployment keeps converging, with no duplicate
//! ReplicaSet or pod. Nodes come from a third process that runs only the agent role.

#![cfg(feature = "etcd")]
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic

use crate::common;

mod leader_failover;
mod roles;
mod sharing;
mod survival;

use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Server;
use setpoint_store::LocalEtcd;
use setpoint_testenv::eventually_blocking;

const DEADLINE: Duration = Duration::from_secs(60);

/// Short leases, so that a takeover happens within a few seconds.
const LEADER_FLAGS: &[&str] = &[
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "500ms",
];

fn start_etcd() -> LocalEtcd {
    LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"))
}

/// Starts a server on `dir` over `etcd` with `extra` flags.
fn start_server(dir: &Path, etcd: &LocalEtcd, extra: &[&str]) -> Server {
    let mut args = vec!["--store", "etcd", "--etcd-endpoints", etcd.endpoint()];
    args.extend_from_slice(extra);
    Server::start_with(dir, "127.0.0.1:0", &args)
}

/// Copies the cluster's credentials of `from` into the data directory `to`, as a second
/// server of the cluster must have them before its first start.
fn copy_pki(from: &Path, to: &Path) {
    let target = to.join("pki");
    std::fs::create_dir_all(&target).unwrap();
    for name in [
        "ca.crt",
        "ca.key",
        "admin.crt",
        "admin.key",
        "admin.token",
        "front-proxy-ca.crt",
        "front-proxy-ca.key",
        "encryption-config.yaml",
    ] {
        std::fs::copy(from.join("pki").join(name), target.join(name)).unwrap();
    }
}

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The holder of a Lease in kube-system, if any.
fn holder(server: &Server, lease: &str) -> Option<String> {
    let out = server.kubectl(&[
        "get",
        "lease",
        "-n",
        "kube-system",
        lease,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// Whether `identity` names the process `pid` (`host_pid_random`).
fn is_process(identity: &str, pid: u32) -> bool {
    identity.contains(&format!("_{pid}_"))
}

/// Pod names, their node and phase, of the Deployment `web`.
fn web_pods(server: &Server) -> Vec<(String, String, String)> {
    let out = server.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{\"\\n\"}{end}",
    ]);
    out.lines()
        .map(|l| {
            let mut w = l.split_whitespace().map(str::to_owned);
            (
                w.next().unwrap_or_default(),
                w.next().unwrap_or_default(),
                w.next().unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until `web` has exactly `replicas` pods, all Running and bound, in one ReplicaSet.
fn converged(server: &Server, replicas: usize) {
    eventually_blocking(&format!("{replicas} Running pods of web"), || {
        let pods = web_pods(server);
        let running = pods
            .iter()
            .filter(|(_, node, phase)| phase == "Running" && !node.is_empty())
            .count();
        (pods.len() == replicas && running == replicas).then_some(())
    });
    let rs = server.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(rs.lines().count(), 1, "ReplicaSets: {rs}");
}

/// Starts `setpoint server` with only the roles given, reaching the API servers through the
/// kubeconfig `kubeconfig` and failing over among `servers`.
fn start_role_process(roles: &str, kubeconfig: &Path, servers: &str, extra: &[&str]) -> Process {
    Process(
        Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .args(["server", "--roles", roles, "--no-agent", "--kubeconfig"])
            .arg(kubeconfig)
            .args(["--api-servers", servers])
            .args(LEADER_FLAGS)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}
