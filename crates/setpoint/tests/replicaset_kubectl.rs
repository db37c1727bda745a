//! The ReplicaSet loop driven by the real `kubectl` against `setpoint server` (all loops on):
//! `kubectl apply` a ReplicaSet and its pods appear; `kubectl scale` moves the count both ways;
//! the status follows.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;

const REPLICASET: &str = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: x}
spec:
  replicas: 3
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers:
      - {name: c, image: "nginx:1.25"}
"#;

/// The names of the pods labelled `app=x`.
fn pods(s: &Server) -> Vec<String> {
    s.ok(&["get", "pods", "-l", "app=x", "-o", "name"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until `kubectl get pods -l app=x` lists exactly `n` pods; returns them.
fn wait_for_pods(s: &Server, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = pods(s);
        if found.len() == n {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} pods of x, have {found:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the ReplicaSet's `status.replicas` is `n`.
fn wait_for_status(s: &Server, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let replicas = s.ok(&["get", "rs", "x", "-o", "jsonpath={.status.replicas}"]);
        if replicas.trim() == n.to_string() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "status.replicas stayed {replicas:?}, wanted {n}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kubectl_scale_should_move_the_pod_count_both_ways() {
    let s = Server::start();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], REPLICASET);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let three = wait_for_pods(&s, 3);
    assert!(three.iter().all(|p| p.starts_with("pod/x-")), "{three:?}");
    let owner = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=x",
        "-o",
        "jsonpath={.items[*].metadata.ownerReferences[0].name}",
    ]);
    assert_eq!(
        owner.split_whitespace().collect::<Vec<_>>(),
        ["x", "x", "x"]
    );
    wait_for_status(&s, 3);

    s.ok(&["scale", "rs", "x", "--replicas=5"]);
    wait_for_pods(&s, 5);
    wait_for_status(&s, 5);

    s.ok(&["scale", "rs", "x", "--replicas=1"]);
    wait_for_pods(&s, 1);
    wait_for_status(&s, 1);
    let table = s.ok(&["get", "rs", "x"]);
    assert!(table.contains("DESIRED"), "{table}");

    // It stays there: no late create or delete.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(pods(&s).len(), 1);
}
