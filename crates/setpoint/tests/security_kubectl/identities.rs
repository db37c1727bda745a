//! Every component under its own identity, with RBAC enforced (issue 19, identities): in a
//! `setpoint server` whose loops write as their `kube-system` ServiceAccounts, whose informers
//! read as `system:kube-controller-manager`, whose scheduler is `system:kube-scheduler` and
//! whose agent is `system:node:local`, a Deployment rolls out, a Service gets endpoints, a Job
//! completes, a StatefulSet gets its claim provisioned and bound, and deleting the Deployment
//! has the garbage collector remove its ReplicaSet and pods — and no request of any of them
//! was refused (`apiserver_request_total` has no `code="403"`): a rule missing from a
//! component's role would show there. The audit log then names, for each kind of write the
//! scenario needs, the component that made it: each loop wrote as its own identity.

use std::process::Command;
use std::time::{Duration, Instant};

use setpoint_testenv::process::Server;

/// A marker in the pods' command lines, to kill what a failed run leaves.
const MARKER: &str = "setpoint-identities-e2e";

/// Kills the marked containers and the shims of the server's agent (whose command lines name
/// its data directory), by pid.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline);
            if cmdline.contains(MARKER)
                || (cmdline.contains("agent-shim") && cmdline.contains(&self.0))
            {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

/// Waits (up to a generous deadline) until `kubectl args` prints what `check` accepts.
fn wait_for(s: &Server, what: &str, args: &[&str], check: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.kubectl(args);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() && check(&text) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: last saw {text:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn manifests() -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {{name: app, image: busybox, command: ["sh", "-c", "sleep 3600 # {MARKER}"]}}
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80}}]
---
apiVersion: batch/v1
kind: Job
metadata: {{name: once}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {{name: once, image: busybox, command: ["sh", "-c", "true # {MARKER}"]}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db}}
spec:
  replicas: 1
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: busybox
        command: ["sh", "-c", "sleep 3600 # {MARKER}"]
        volumeMounts: [{{name: data, mountPath: /tmp/setpoint-identities-data}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Mi}}}}
"#
    )
}

#[test]
fn workloads_should_converge_with_every_component_under_its_own_identity() {
    let s = Server::start();
    let _cleanup = Cleanup(s.dir.display().to_string());
    // The components' roles are there, bound to their identities.
    let binding = s.ok(&[
        "get",
        "clusterrolebinding",
        "system:controller:deployment-controller",
        "-o",
        "jsonpath={.subjects[0].kind}/{.subjects[0].namespace}/{.subjects[0].name}",
    ]);
    assert_eq!(binding, "ServiceAccount/kube-system/deployment-controller");
    s.kubectl_stdin(&["apply", "-f", "-"], &manifests());
    wait_for(
        &s,
        "the Deployment available",
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.availableReplicas}",
        ],
        |t| t == "2",
    );
    wait_for(
        &s,
        "the Service's endpoints",
        &[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[0]}",
        ],
        |t| !t.trim().is_empty(),
    );
    wait_for(
        &s,
        "the Job complete",
        &["get", "job", "once", "-o", "jsonpath={.status.succeeded}"],
        |t| t == "1",
    );
    wait_for(
        &s,
        "the StatefulSet ready",
        &[
            "get",
            "statefulset",
            "db",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |t| t == "1",
    );
    wait_for(
        &s,
        "the claim bound",
        &["get", "pvc", "data-db-0", "-o", "jsonpath={.status.phase}"],
        |t| t == "Bound",
    );

    // Garbage collection: the Deployment's ReplicaSet and pods go after it.
    s.ok(&["delete", "deployment", "web", "--wait=false"]);
    wait_for(
        &s,
        "the ReplicaSets collected",
        &["get", "replicasets", "-l", "app=web", "-o", "name"],
        str::is_empty,
    );
    wait_for(
        &s,
        "the pods collected",
        &["get", "pods", "-l", "app=web", "-o", "name"],
        str::is_empty,
    );
    s.ok(&["delete", "statefulset", "db", "--wait=false"]);
    wait_for(
        &s,
        "the StatefulSet's pod gone",
        &["get", "pods", "-l", "app=db", "-o", "name"],
        str::is_empty,
    );

    let metrics = s.ok(&["get", "--raw", "/metrics"]);
    let refused: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total") && l.contains("code=\"403\""))
        .collect();
    assert!(
        refused.is_empty(),
        "requests refused:\n{}",
        refused.join("\n")
    );

    // Who made each kind of write, by the audit log (written in batches a few ms apart).
    let sa = |name: &str| format!("system:serviceaccount:kube-system:{name}");
    let expected: Vec<(&str, &str, &str, String)> = vec![
        ("create", "replicasets", "", sa("deployment-controller")),
        ("create", "pods", "", sa("replicaset-controller")),
        (
            "create",
            "pods",
            "binding",
            "system:kube-scheduler".to_owned(),
        ),
        (
            "create",
            "endpointslices",
            "",
            sa("endpointslice-controller"),
        ),
        ("create", "pods", "", sa("job-controller")),
        ("create", "pods", "", sa("statefulset-controller")),
        (
            "create",
            "persistentvolumeclaims",
            "",
            sa("statefulset-controller"),
        ),
        (
            "create",
            "persistentvolumes",
            "",
            sa("local-path-provisioner"),
        ),
        ("delete", "replicasets", "", sa("generic-garbage-collector")),
        ("delete", "pods", "", sa("generic-garbage-collector")),
    ];
    let log = s.dir.join("audit").join("audit.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let made = |verb: &str, resource: &str, sub: &str, user: &str| {
            events.iter().any(|e| {
                e["verb"] == verb
                    && e["objectRef"]["resource"] == resource
                    && e["objectRef"]["subresource"].as_str().unwrap_or("") == sub
                    && e["user"]["username"] == user
                    && e["responseStatus"]["code"]
                        .as_u64()
                        .is_some_and(|c| (200..300).contains(&c))
            })
        };
        let missing: Vec<String> = expected
            .iter()
            .filter(|(verb, resource, sub, user)| !made(verb, resource, sub, user))
            .map(|(verb, resource, sub, user)| format!("{verb} {resource}/{sub} by {user}"))
            .collect();
        // Pods' status comes from the node agent as its node.
        let by_node = events.iter().any(|e| {
            e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["subresource"] == "status"
                && e["user"]["username"] == "system:node:local"
        });
        // No component wrote as the admin: the admin's writes are the test's own kubectl's.
        let admin_writes: Vec<String> = events
            .iter()
            .filter(|e| {
                e["user"]["username"] == "setpoint-admin"
                    && !matches!(e["verb"].as_str(), Some("get" | "list" | "watch"))
                    && !e["userAgent"].as_str().unwrap_or("").starts_with("kubectl")
            })
            .map(|e| format!("{} {} by {}", e["verb"], e["objectRef"], e["userAgent"]))
            .collect();
        if missing.is_empty() && by_node && admin_writes.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writes not made by their component: {missing:?}; pod status by the node: {by_node}; \
             component writes as the admin: {admin_writes:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
