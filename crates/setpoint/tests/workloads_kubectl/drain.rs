//! `kubectl drain` held by a PodDisruptionBudget and then let through, against
//! `setpoint server --simulated-nodes 3 --no-agent` (all loops on): a Deployment's two pods on
//! one node under a budget of `minAvailable: 2` — the drain cordons the node, retries the
//! evictions' 429s (printing kube's budget message) and fails at its timeout with the pods
//! still there; with the budget relaxed to `minAvailable: 1` the drain evicts one pod, waits for
//! its replacement on another node to be ready, evicts the other and succeeds; `uncordon`
//! makes the node schedulable again. A bare pod with an `emptyDir` on the node needs `--force`
//! and `--delete-emptydir-data`, a DaemonSet's pod `--ignore-daemonsets`.

use crate::common::Server;
use setpoint_testenv::eventually_blocking;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: "nginx:1.27"}
"#;

const LONER: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: loner}
spec:
  nodeName: sim-0
  volumes: [{name: scratch, emptyDir: {}}]
  containers:
  - {name: c, image: busybox, volumeMounts: [{name: scratch, mountPath: /scratch}]}
"#;

const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {drain-test: daemon}
      containers:
      - {name: c, image: busybox}
"#;

fn budget(min_available: u32) -> String {
    format!(
        r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web}}
spec:
  minAvailable: {min_available}
  selector: {{matchLabels: {{app: web}}}}
"#
    )
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], yaml);
    assert!(
        out.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `(name, node, ready, terminating)` of the web pods.
fn web_pods(s: &Server) -> Vec<(String, String, bool, bool)> {
    let out = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}. {.status.conditions[?(@.type==\"Ready\")].status}. {.metadata.deletionTimestamp}.{\"\\n\"}{end}",
    ]);
    out.lines()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let name = parts.next()?.to_owned();
            let node = parts.next()?.trim_end_matches('.').to_owned();
            let ready = parts.next()? == "True.";
            let terminating = parts.next().is_some_and(|d| d != ".");
            Some((name, node, ready, terminating))
        })
        .collect()
}

/// The budget's `status` fields `currentHealthy desiredHealthy disruptionsAllowed`.
fn budget_status(s: &Server) -> String {
    s.ok(&[
        "get",
        "pdb",
        "web",
        "-o",
        "jsonpath={.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed}",
    ])
}

fn unschedulable(s: &Server, node: &str) -> String {
    s.ok(&["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"])
}

#[test]
fn kubectl_drain_should_wait_for_the_disruption_budget() {
    let data = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(
        &data.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--simulated-nodes", "3"],
    );
    eventually_blocking("3 nodes", || {
        let out = server.ok(&["get", "nodes", "--no-headers"]);
        if out.lines().count() == 3 {
            Ok(())
        } else {
            Err(out)
        }
    });
    // Both pods on sim-0: the other nodes are cordoned while the Deployment starts.
    for node in ["sim-1", "sim-2"] {
        let out = server.ok(&["cordon", node]);
        assert!(out.contains(&format!("node/{node} cordoned")), "{out}");
    }
    assert_eq!(unschedulable(&server, "sim-1"), "true");
    apply(&server, DEPLOYMENT);
    eventually_blocking("2 ready web pods on sim-0", || {
        let pods = web_pods(&server);
        if pods.len() == 2
            && pods
                .iter()
                .all(|(_, node, ready, _)| node == "sim-0" && *ready)
        {
            Ok(())
        } else {
            Err(format!("{pods:?}"))
        }
    });
    for node in ["sim-1", "sim-2"] {
        let out = server.ok(&["uncordon", node]);
        assert!(out.contains(&format!("node/{node} uncordoned")), "{out}");
    }
    assert_eq!(unschedulable(&server, "sim-1"), "");

    // minAvailable 2 of 2: no disruption allowed, the drain cannot finish.
    apply(&server, &budget(2));
    eventually_blocking("the budget synced", || {
        let status = budget_status(&server);
        if status == "2 2 0" {
            Ok(())
        } else {
            Err(status)
        }
    });
    let before: Vec<String> = web_pods(&server).into_iter().map(|p| p.0).collect();
    let out = server.kubectl(&["drain", "sim-0", "--timeout=12s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "drain succeeded:\n{stdout}{stderr}");
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stdout}{stderr}"
    );
    assert!(stdout.contains("node/sim-0 cordoned"), "{stdout}{stderr}");
    assert_eq!(unschedulable(&server, "sim-0"), "true");
    let after: Vec<String> = web_pods(&server)
        .into_iter()
        .filter(|p| !p.3)
        .map(|p| p.0)
        .collect();
    assert_eq!(before, after, "the budget let a pod go");

    // minAvailable 1: one at a time, each replaced on another node before the next goes.
    apply(&server, &budget(1));
    eventually_blocking("one disruption allowed", || {
        let status = budget_status(&server);
        if status == "2 1 1" {
            Ok(())
        } else {
            Err(status)
        }
    });
    // A bare pod with an emptyDir on the node too: refused without --force and
    // --delete-emptydir-data, evicted with them. And a DaemonSet's pod, left alone with
    // --ignore-daemonsets (kubectl GETs its DaemonSet).
    apply(&server, LONER);
    server.ok(&["label", "node", "sim-0", "drain-test=daemon"]);
    apply(&server, DAEMONSET);
    // The DaemonSet loop puts its pod on sim-0, the one node its selector picks.
    eventually_blocking("the DaemonSet's pod on sim-0", || {
        let nodes = server.ok(&[
            "get",
            "pods",
            "-l",
            "app=agent",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ]);
        if nodes.trim() == "sim-0" {
            Ok(())
        } else {
            Err(nodes)
        }
    });
    // kubectl stops at a pod's first objection: local storage, then the missing controller.
    let refused = server.fails(&["drain", "sim-0", "--timeout=20s"]);
    assert!(
        refused.contains("cannot delete Pods with local storage (use --delete-emptydir-data to override): default/loner"),
        "{refused}"
    );
    assert!(
        refused.contains(
            "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/"
        ),
        "{refused}"
    );
    let refused = server.fails(&["drain", "sim-0", "--delete-emptydir-data", "--timeout=20s"]);
    assert!(
        refused.contains("cannot delete Pods that declare no controller (use --force to override): default/loner"),
        "{refused}"
    );
    let out = server.kubectl(&[
        "drain",
        "sim-0",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=120s",
    ]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "drain failed:\n{all}");
    for name in &before {
        assert!(all.contains(&format!("pod/{name} evicted")), "{all}");
    }
    assert!(all.contains("pod/loner evicted"), "{all}");
    assert!(
        all.contains("ignoring DaemonSet-managed Pods: default/agent-"),
        "{all}"
    );
    assert!(all.contains("node/sim-0 drained"), "{all}");
    eventually_blocking("2 ready web pods elsewhere", || {
        let pods: Vec<_> = web_pods(&server).into_iter().filter(|p| !p.3).collect();
        if pods.len() == 2
            && pods
                .iter()
                .all(|(_, node, ready, _)| node != "sim-0" && *ready)
        {
            Ok(())
        } else {
            Err(format!("{pods:?}"))
        }
    });
    assert_eq!(unschedulable(&server, "sim-0"), "true");
    let out = server.ok(&["uncordon", "sim-0"]);
    assert!(out.contains("node/sim-0 uncordoned"), "{out}");
    assert_eq!(unschedulable(&server, "sim-0"), "");
}
