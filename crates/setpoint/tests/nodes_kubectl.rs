//! Nodes driven by the real `kubectl` against `setpoint server --simulated-nodes 3 --no-agent`
//! (all loops on): the simulated nodes show `Ready` in `kubectl get nodes` and run a
//! ReplicaSet's pods; a separate `setpoint agent --simulated` process registers its own node
//! and runs pods; when that process is killed, its node goes `NotReady` (`Ready=Unknown`, tainted
//! unreachable) after the grace period, and its pods are evicted once their toleration runs
//! out and replaced on the other nodes. `kubectl drain` empties a node through `pods/eviction`
//! (and with `--disable-eviction`, through protobuf DELETEs), and `kubectl debug --copy-to`
//! copies a pod whose spec reaches most of PodSpec.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Server;
use setpoint_testenv::eventually_blocking;

fn replicaset(name: &str, replicas: u32) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      tolerations:
      - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}
      containers:
      - {{name: c, image: "nginx:1.27"}}
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

/// `(name, phase, node, terminating)` of the pods labelled `app=<app>`.
fn pods(s: &Server, app: &str) -> Vec<(String, String, String, bool)> {
    let out = s.ok(&[
        "get",
        "pods",
        "-l",
        &format!("app={app}"),
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.spec.nodeName}. {.metadata.deletionTimestamp}.{\"\\n\"}{end}",
    ]);
    out.lines()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let name = parts.next()?.to_owned();
            let phase = parts.next()?.to_owned();
            let node = parts.next()?.trim_end_matches('.').to_owned();
            let terminating = parts.next().is_some_and(|d| d != ".");
            Some((name, phase, node, terminating))
        })
        .collect()
}

/// Binds the pods of `app` that still have no node to `nodes` round-robin, as the scheduler
/// would (only needed if the scheduler leaves them).
fn bind_unscheduled(s: &Server, app: &str, nodes: &[&str]) {
    for (i, (name, _, node, _)) in pods(s, app).into_iter().enumerate() {
        if node.is_empty() {
            let binding = format!(
                r#"{{"apiVersion":"v1","kind":"Binding","metadata":{{"name":"{name}"}},"target":{{"apiVersion":"v1","kind":"Node","name":"{}"}}}}"#,
                nodes[i % nodes.len()]
            );
            let _ = s.kubectl_stdin(
                &[
                    "create",
                    "--raw",
                    &format!("/api/v1/namespaces/default/pods/{name}/binding"),
                    "-f",
                    "-",
                ],
                &binding,
            );
        }
    }
}

/// Waits until `app` has `n` Running, non-terminating pods on nodes `on` accepts; binds pods
/// left unscheduled for a while to `fallback` nodes.
fn wait_running(
    s: &Server,
    app: &str,
    n: usize,
    on: impl Fn(&str) -> bool,
    fallback: &[&str],
) -> Vec<String> {
    let start = Instant::now();
    eventually_blocking(&format!("{n} Running pods of {app}"), || {
        let all = pods(s, app);
        let good: Vec<String> = all
            .iter()
            .filter(|(_, phase, node, terminating)| phase == "Running" && !terminating && on(node))
            .map(|(name, ..)| name.clone())
            .collect();
        if good.len() == n {
            return Ok(good);
        }
        if start.elapsed() > Duration::from_secs(15) {
            bind_unscheduled(s, app, fallback);
        }
        Err(format!("{all:?}"))
    })
}

fn ready_status(s: &Server, node: &str) -> String {
    s.ok(&[
        "get",
        "node",
        node,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ])
}

/// A `setpoint agent --simulated` process; killed when dropped.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn nodes_should_run_pods_and_a_lost_node_should_be_emptied() {
    let data = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(
        &data.path().join("data"),
        "127.0.0.1:0",
        &[
            "--no-agent",
            "--simulated-nodes",
            "3",
            // Above the agents' 10 s Lease renewal interval (kube's default is 40 s), or
            // healthy nodes would be marked Unknown between renewals.
            "--node-monitor-grace-period",
            "15s",
        ],
    );
    let sims = ["sim-0", "sim-1", "sim-2"];

    // Three Ready nodes.
    eventually_blocking("3 Ready nodes", || {
        let out = server.ok(&["get", "nodes", "--no-headers"]);
        let ready = out
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count();
        if ready == 3 {
            Ok(())
        } else {
            Err(out)
        }
    });
    let wide = server.ok(&["get", "nodes", "-o", "wide"]);
    assert!(wide.contains("172.16.0.1"), "{wide}");

    // A ReplicaSet's pods run on them.
    apply(&server, &replicaset("web", 6));
    wait_running(&server, "web", 6, |n| sims.contains(&n), &sims);

    // A node in its own process: new pods go there while the others are cordoned.
    for sim in sims {
        server.ok(&["cordon", sim]);
    }
    let root = tempfile::tempdir().expect("agent dir");
    let agent = Agent(
        Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .args(["agent", "--simulated", "--node-name", "x", "--kubeconfig"])
            .arg(server.kubeconfig())
            .arg("--root-dir")
            .arg(root.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the agent"),
    );
    eventually_blocking("node x Ready", || {
        let out = server.kubectl(&["get", "node", "x", "--no-headers"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.split_whitespace().nth(1) == Some("Ready") {
            Ok(())
        } else {
            Err(text)
        }
    });
    apply(&server, &replicaset("edge", 2));
    wait_running(&server, "edge", 2, |n| n == "x", &["x"]);
    for sim in sims {
        server.ok(&["uncordon", sim]);
    }

    // The node's process dies: the node goes NotReady, tainted unreachable.
    drop(agent);
    eventually_blocking("node x Unknown", || {
        let status = ready_status(&server, "x");
        if status == "Unknown" {
            Ok(())
        } else {
            Err(status)
        }
    });
    let line = server.ok(&["get", "node", "x", "--no-headers"]);
    assert_eq!(line.split_whitespace().nth(1), Some("NotReady"), "{line}");
    let taints = server.ok(&[
        "get",
        "node",
        "x",
        "-o",
        "jsonpath={range .spec.taints[*]}{.key}:{.effect} {end}",
    ]);
    assert!(
        taints.contains("node.kubernetes.io/unreachable:NoExecute"),
        "{taints}"
    );

    // Its pods are evicted after their 2 s and replaced on the other nodes.
    wait_running(&server, "edge", 2, |n| sims.contains(&n), &sims);
    let edge = pods(&server, "edge");
    assert!(
        edge.iter()
            .filter(|(_, _, node, _)| node == "x")
            .all(|(_, _, _, terminating)| *terminating),
        "{edge:?}"
    );
    // The web pods on the healthy nodes were left alone.
    wait_running(&server, "web", 6, |n| sims.contains(&n), &sims);
}

/// Runs kubectl, expecting success; returns its standard output and error together.
fn ok_with_stderr(s: &Server, args: &[&str]) -> String {
    let out = s.kubectl(args);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?} failed:\n{all}");
    all
}

/// A pod bound to `node` with a spec that reaches most of PodSpec's messages (what
/// `kubectl debug --copy-to` then sends back as protobuf).
fn rich_pod(name: &str, node: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: drained}}}}
spec:
  nodeName: {node}
  volumes:
  - {{name: data, emptyDir: {{sizeLimit: 1Gi}}}}
  - {{name: cfg, configMap: {{name: cm1, optional: true, items: [{{key: k, path: p, mode: 0644}}]}}}}
  - name: proj
    projected: {{sources: [{{downwardAPI: {{items: [{{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}]}}}}]}}
  securityContext: {{runAsUser: 1000, runAsNonRoot: true, fsGroup: 2000, seccompProfile: {{type: RuntimeDefault}}}}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/os, operator: In, values: [linux]}}]}}]
  tolerations: [{{operator: Exists, effect: NoExecute, tolerationSeconds: 60}}]
  topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: drained}}}}}}]
  dnsConfig: {{options: [{{name: ndots, value: "2"}}]}}
  containers:
  - name: main
    image: busybox
    command: [sleep, "1000"]
    env:
    - name: B
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    envFrom: [{{configMapRef: {{name: cm1, optional: true}}}}]
    resources: {{limits: {{cpu: 500m, memory: 128Mi}}}}
    volumeMounts: [{{name: data, mountPath: /data}}]
    livenessProbe: {{httpGet: {{path: /healthz, port: 8080}}, periodSeconds: 10}}
    readinessProbe: {{tcpSocket: {{port: 8080}}}}
    lifecycle: {{preStop: {{exec: {{command: [sh, -c, "sleep 1"]}}}}}}
    securityContext: {{capabilities: {{drop: [ALL]}}, allowPrivilegeEscalation: false}}
"#
    )
}

#[test]
fn kubectl_drain_should_evict_pods_and_debug_should_copy_a_pod() {
    // Regression (issue 14.8): `kubectl drain` failed on the protobuf DeleteOptions body of its
    // pod DELETEs (and there was no `pods/eviction` for it to use instead), and
    // `kubectl debug --copy-to` failed on
    // `unsupported field 14 in protobuf message PodSpec`.
    let data = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(
        &data.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--simulated-nodes", "2"],
    );
    eventually_blocking("2 nodes", || {
        let out = server.ok(&["get", "nodes", "--no-headers"]);
        if out.lines().count() == 2 {
            Ok(())
        } else {
            Err(out)
        }
    });
    let discovery = server.ok(&["get", "--raw", "/api/v1"]);
    assert!(
        discovery.contains(r#""name":"pods/eviction""#),
        "{discovery}"
    );

    // A copy of a pod with a rich spec, made by `kubectl debug` (a protobuf Pod).
    apply(&server, &rich_pod("rich", "sim-0"));
    let out = server.ok(&[
        "debug",
        "rich",
        "--copy-to=rich-copy",
        "--image=busybox",
        "--attach=false",
        "--container=debugger",
    ]);
    assert!(out.is_empty() || !out.contains("error"), "{out}");
    let containers = server.ok(&[
        "get",
        "pod",
        "rich-copy",
        "-o",
        "jsonpath={.spec.containers[*].name} {.spec.securityContext.runAsUser} {.spec.volumes[*].name}",
    ]);
    // ServiceAccount admission added the token volume to the original; the copy keeps it.
    let (named, token_volume) = containers.rsplit_once(' ').expect("the volumes' names");
    assert_eq!(named, "main debugger 1000 data cfg proj", "{containers}");
    assert!(token_volume.starts_with("kube-api-access-"), "{containers}");
    // Every other kubectl installed beside it (1.27–1.33) sends its own copy.
    for minor in 27..=33 {
        let Some(bin) = common::kubectl_version(minor) else {
            continue;
        };
        let copy = format!("rich-copy-{minor}");
        let out = Command::new(&bin)
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .args(["debug", "rich", "--image=busybox", "--attach=false"])
            .arg(format!("--copy-to={copy}"))
            .output()
            .expect("kubectl");
        assert!(
            out.status.success(),
            "kubectl 1.{minor} debug --copy-to: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let volumes = server.ok(&[
            "get",
            "pod",
            &copy,
            "-o",
            "jsonpath={.spec.volumes[*].name}",
        ]);
        assert!(
            volumes.starts_with("data cfg proj kube-api-access-"),
            "{volumes}"
        );
    }

    // Drain through the eviction subresource (kubectl 1.33 POSTs a JSON policy/v1 Eviction).
    for (name, node) in [("a", "sim-0"), ("b", "sim-1")] {
        apply(
            &server,
            &format!(
                "{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"{name}\",\"labels\":{{\"app\":\"drained\"}}}},\"spec\":{{\"nodeName\":\"{node}\",\"containers\":[{{\"name\":\"c\",\"image\":\"busybox\"}}]}}}}"
            ),
        );
    }
    eventually_blocking("pods Running", || {
        let running = pods(&server, "drained")
            .iter()
            .filter(|(_, phase, ..)| phase == "Running")
            .count();
        if running >= 2 {
            Ok(())
        } else {
            Err(format!("{:?}", pods(&server, "drained")))
        }
    });
    let out = ok_with_stderr(
        &server,
        &[
            "drain",
            "sim-0",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",
            "--timeout=60s",
        ],
    );
    assert!(out.contains("evicting pod default/a"), "{out}");
    assert!(out.contains("node/sim-0 drained"), "{out}");
    let left: Vec<_> = pods(&server, "drained")
        .into_iter()
        .filter(|(_, _, node, _)| node == "sim-0")
        .collect();
    assert!(left.is_empty(), "pods left on sim-0: {left:?}");

    // Drain with plain DELETEs (a protobuf DeleteOptions each).
    let out = ok_with_stderr(
        &server,
        &[
            "drain",
            "sim-1",
            "--force",
            "--delete-emptydir-data",
            "--disable-eviction",
            "--grace-period=1",
            "--timeout=60s",
        ],
    );
    assert!(out.contains("pod/b deleted"), "{out}");
    assert!(out.contains("node/sim-1 drained"), "{out}");
    assert!(
        pods(&server, "drained").is_empty(),
        "{:?}",
        pods(&server, "drained")
    );
}
