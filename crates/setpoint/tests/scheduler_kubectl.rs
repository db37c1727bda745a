//! The scheduler driven by the real `kubectl` against `setpoint server --no-agent` (every loop
//! on, no node agent): nodes created with `kubectl create` and made Ready with `kubectl patch
//! --subresource=status`; applied pods get a node (`kubectl get pod -o wide` shows it), the
//! node selector is obeyed, and a pod no node can take stays Pending with the
//! `FailedScheduling` reason in `kubectl describe pod`.

use crate::common;

use common::Server;
use setpoint_testenv::eventually_blocking;

const NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: worker-1, labels: {disk: ssd}}
---
apiVersion: v1
kind: Node
metadata: {name: worker-2, labels: {disk: hdd}}
"#;

const NODE_STATUS: &str = r#"{"status": {
  "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
  "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
}}"#;

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: c, image: "nginx:1.25", resources: {requests: {cpu: 500m}}}
---
apiVersion: v1
kind: Pod
metadata: {name: fast-disk}
spec:
  nodeSelector: {disk: ssd}
  containers:
  - {name: c, image: "nginx:1.25"}
---
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  containers:
  - {name: c, image: "nginx:1.25", resources: {requests: {cpu: "16"}}}
"#;

/// The NODE column of `kubectl get pod <name> -o wide`, once it names a node.
fn wide_node(s: &Server, pod: &str) -> String {
    eventually_blocking(&format!("{pod} shows a node"), || {
        let table = s.ok(&["get", "pod", pod, "-o", "wide"]);
        let mut lines = table.lines();
        let header: Vec<&str> = lines.next()?.split_whitespace().collect();
        let row: Vec<&str> = lines.next()?.split_whitespace().collect();
        let column = header.iter().position(|h| *h == "NODE")?;
        let node = (*row.get(column)?).to_owned();
        (node != "<none>").then_some(node)
    })
}

#[test]
fn kubectl_should_show_pods_placed_on_ready_nodes_and_why_one_is_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let s = Server::start_with(&tmp.path().join("data"), "127.0.0.1:0", &["--no-agent"]);
    let out = s.kubectl_stdin(&["create", "-f", "-"], NODES);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for node in ["worker-1", "worker-2"] {
        s.ok(&[
            "patch",
            "node",
            node,
            "--subresource=status",
            "--type=merge",
            "-p",
            NODE_STATUS,
        ]);
    }
    let out = s.kubectl_stdin(&["apply", "-f", "-"], PODS);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let web = wide_node(&s, "web");
    assert!(web == "worker-1" || web == "worker-2", "{web}");
    assert_eq!(wide_node(&s, "fast-disk"), "worker-1");
    let scheduled = s.ok(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].status}",
    ]);
    assert_eq!(scheduled.trim(), "True");

    let expected = "0/2 nodes are available: 2 Insufficient cpu.";
    let description = eventually_blocking("huge shows FailedScheduling", || {
        let d = s.ok(&["describe", "pod", "huge"]);
        (d.contains("FailedScheduling") && d.contains(expected)).then_some(d)
    });
    assert!(description.contains("Pending"), "{description}");
    assert!(description.contains("default-scheduler"), "{description}");
    let reason = s.ok(&[
        "get",
        "pod",
        "huge",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}",
    ]);
    assert_eq!(reason.trim(), "Unschedulable");
    let node = s.ok(&["get", "pod", "huge", "-o", "jsonpath={.spec.nodeName}"]);
    assert_eq!(node.trim(), "", "an unfittable pod stays unbound");
}
