//! `kubectl top` through `setpoint server` (all loops and the local agent on): the API
//! server's `metrics.k8s.io/v1beta1` asks the local agent, which samples its containers'
//! cgroups (as root) or processes in `/proc`. A pod burning CPU shows in `kubectl top pods` (and not under another
//! pod's label selector), the node in `kubectl top nodes`, the raw list parses as a
//! `PodMetricsList`, and a pod without metrics is a 404 worded as metrics-server words it.

use crate::common;

use common::burn::wait_output;
use common::processes::Cleanup;
use common::Server;

/// Two pods on the local agent's node: `burn` spins a shell loop, `idle` sleeps.
fn pods(marker: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: burn, labels: {{app: burn}}}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: spin
    image: busybox
    command: ["sh", "-c", "while :; do :; done # {marker}"]
---
apiVersion: v1
kind: Pod
metadata: {{name: idle, labels: {{app: idle}}}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: nap
    image: busybox
    command: ["sh", "-c", "exec sleep 1000 # {marker}"]
"#
    )
}

/// The row of `name` in `kubectl top` output, split in columns.
fn row<'a>(table: &'a str, name: &str) -> Option<Vec<&'a str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&name))
}

/// Millicores from a `kubectl top` CPU cell (`250m`, `1`).
fn millicores(cell: &str) -> Option<u64> {
    match cell.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => cell.parse::<u64>().ok().map(|c| c * 1000),
    }
}

#[test]
fn kubectl_top_should_show_a_busy_pod_and_the_node() {
    let s = Server::start();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-top-kubectl-{}-{nanos:x}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };

    // Discovery: kubectl finds the group before it asks for metrics.
    let resources = s.ok(&[
        "api-resources",
        "--api-group=metrics.k8s.io",
        "--no-headers",
    ]);
    let mut names: Vec<&str> = resources
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.sort_unstable();
    assert_eq!(names, vec!["nodes", "pods"], "{resources}");

    let out = s.kubectl_stdin(&["apply", "-f", "-"], &pods(&marker));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The burner shows CPU; both pods show memory.
    let top = wait_output(&s, &["top", "pods"], |t| {
        let busy = row(t, "burn").and_then(|r| millicores(r.get(1)?));
        busy.is_some_and(|m| m > 0) && row(t, "idle").is_some()
    });
    let header: Vec<&str> = top
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, vec!["NAME", "CPU(cores)", "MEMORY(bytes)"], "{top}");
    // Memory in MiB; a shell's working set may round down to 0Mi when measured from its
    // cgroup (pages already charged elsewhere, shared libraries, do not count): the raw
    // figure below is checked for a non-zero value.
    let memory = |name: &str| row(&top, name).and_then(|r| r.get(2).map(|m| m.to_string()));
    assert!(memory("burn").is_some_and(|m| m.ends_with("Mi")), "{top}");
    assert!(memory("idle").is_some_and(|m| m.ends_with("Mi")), "{top}");

    // A label selector picks pods, as metrics-server applies it.
    let selected = s.ok(&["top", "pods", "-l", "app=burn", "--no-headers"]);
    let names: Vec<&str> = selected
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, vec!["burn"], "{selected}");
    let containers = s.ok(&["top", "pod", "burn", "--containers", "--no-headers"]);
    assert!(
        row(&containers, "burn").is_some_and(|r| r.get(1) == Some(&"spin")),
        "{containers}"
    );

    // The node: CPU and memory with their share of allocatable.
    let nodes = wait_output(&s, &["top", "nodes", "--no-headers"], |t| {
        row(t, "local").is_some_and(|r| r.len() == 5 && r[1] != "<unknown>")
    });
    let local = row(&nodes, "local").unwrap_or_default();
    assert!(millicores(local[1]).is_some_and(|m| m > 0), "{nodes}");
    assert!(
        local[2].ends_with('%') && local[4].ends_with('%'),
        "{nodes}"
    );

    // The raw list parses as a PodMetricsList with kube's shapes.
    let raw = s.ok(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
    ]);
    let list: serde_json::Value = serde_json::from_str(&raw).expect("JSON");
    assert_eq!(list["kind"], "PodMetricsList", "{raw}");
    assert_eq!(list["apiVersion"], "metrics.k8s.io/v1beta1", "{raw}");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let burn = items
        .iter()
        .find(|i| i["metadata"]["name"] == "burn")
        .unwrap_or_else(|| panic!("burn in {raw}"));
    assert_eq!(burn["kind"], "PodMetrics");
    assert_eq!(burn["metadata"]["namespace"], "default");
    assert_eq!(burn["metadata"]["labels"]["app"], "burn");
    assert!(
        burn["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{burn}"
    );
    assert!(
        burn["window"].as_str().is_some_and(|w| w.ends_with('s')),
        "{burn}"
    );
    assert_eq!(burn["containers"][0]["name"], "spin");
    assert!(burn["containers"][0]["usage"]["cpu"].is_string(), "{burn}");
    assert!(
        burn["containers"][0]["usage"]["memory"]
            .as_str()
            .is_some_and(|m| m != "0"),
        "{burn}"
    );
    let node: serde_json::Value =
        serde_json::from_str(&s.ok(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/local"]))
            .expect("JSON");
    assert_eq!(node["kind"], "NodeMetrics");
    assert!(node["usage"]["memory"].is_string(), "{node}");
    // `kubectl get` prints metrics-server's table columns.
    let table = s.ok(&["get", "podmetrics", "burn"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, vec!["NAME", "CPU", "MEMORY", "WINDOW"], "{table}");
    assert!(row(&table, "burn").is_some_and(|r| r.len() == 4), "{table}");

    // No metrics: 404 as metrics-server answers; watch is not served.
    let err = s.fails(&["top", "pod", "nope"]);
    assert!(
        err.contains("podmetrics.metrics.k8s.io \"default/nope\" not found"),
        "{err}"
    );
    let err = s.fails(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/nowhere"]);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    let err = s.fails(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/pods?watch=true",
    ]);
    assert!(
        err.contains("MethodNotAllowed") || err.contains("405"),
        "{err}"
    );

    s.ok(&["delete", "pods", "--all", "--wait=true", "--timeout=60s"]);
}

#[test]
fn kubectl_top_should_show_synthetic_usage_on_simulated_nodes() {
    // Simulated nodes run no processes and have no reachable agent: their pods use what they
    // request, and the node the sum.
    let s = Server::start_fresh_with(&["--no-agent", "--simulated-nodes", "1"]);
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: steady}
spec:
  nodeName: sim-0
  containers:
  - name: app
    image: busybox
    resources: {requests: {cpu: 250m, memory: 64Mi}}
"#;
    let out = s.kubectl_stdin(&["apply", "-f", "-"], pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let top = wait_output(&s, &["top", "pods", "--no-headers"], |t| {
        row(t, "steady").is_some()
    });
    assert_eq!(
        row(&top, "steady"),
        Some(vec!["steady", "250m", "64Mi"]),
        "{top}"
    );
    let nodes = wait_output(&s, &["top", "nodes", "--no-headers"], |t| {
        row(t, "sim-0").is_some_and(|r| r.get(1) == Some(&"250m"))
    });
    assert_eq!(
        row(&nodes, "sim-0").and_then(|r| r.get(3).copied()),
        Some("64Mi"),
        "{nodes}"
    );
    let table = s.ok(&["get", "nodemetrics", "sim-0", "--no-headers"]);
    assert_eq!(
        row(&table, "sim-0"),
        Some(vec!["sim-0", "250m", "64Mi", "10s"]),
        "{table}"
    );
}
