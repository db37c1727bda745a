//! Resource limits through `kubectl` (one server): a container over its memory limit is
//! OOM-killed and restarted (`kubectl get -o jsonpath` shows `OOMKilled`/137 and the QoS
//! class), and `kubectl top pod` shows the figures of the container's cgroups — memory held
//! by a process that left the container's session counts; `runAsUser`/`runAsGroup`/
//! `supplementalGroups` are the container's identity; `kubectl exec` into a
//! `shareProcessNamespace` pod sees the pod's processes only. Root only (cgroup writes, uids).

use crate::common::burn::wait_output;
use crate::common::processes::Cleanup;
use crate::common::Server;
use crate::pods_kubectl::kit::is_root;

fn pods(marker: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: hog}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "head -c 200M /dev/zero | tail # {marker}"]
    resources: {{limits: {{memory: 64Mi, cpu: 500m}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: holder}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    # 50 MB held by a shell in a session of its own: outside what /proc sampling sees,
    # inside the container's cgroup.
    command: ["sh", "-c", "setsid sh -c 'x=$(head -c 50000000 /dev/zero | tr \"\\0\" a); sleep 1000 # {marker}' & exec sleep 1000 # {marker}"]
    resources: {{requests: {{memory: 32Mi}}, limits: {{memory: 256Mi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: someone}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  securityContext: {{runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000]}}
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "echo $(id -u) $(id -g) $(id -G); exec sleep 1000 # {marker}"]
---
apiVersion: v1
kind: Pod
metadata: {{name: sharing}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  shareProcessNamespace: true
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "exec sleep 1000 # {marker}"]
  - name: other
    image: busybox
    command: ["sh", "-c", "exec sleep 1001 # {marker}"]
"#
    )
}

/// Mebibytes from a `kubectl top` memory cell (`52Mi`).
fn mebibytes(cell: &str) -> Option<u64> {
    cell.strip_suffix("Mi")?.parse().ok()
}

#[test]
fn kubectl_should_show_oom_kills_and_cgroup_usage() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Server::start();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("setpoint-limits-kubectl-{}-{nanos:x}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &pods(&marker));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let path = "{.status.containerStatuses[0].lastState.terminated.reason}/\
                {.status.containerStatuses[0].lastState.terminated.exitCode}/{.status.qosClass}";
    let jsonpath = format!("jsonpath={path}");
    wait_output(&s, &["get", "pod", "hog", "-o", &jsonpath], |t| {
        t == "OOMKilled/137/Guaranteed"
    });
    let qos = s.ok(&["get", "pod", "holder", "-o", "jsonpath={.status.qosClass}"]);
    assert_eq!(qos, "Burstable");

    // The escaped shell's 50 MB count: the working set is the cgroup's.
    let top = wait_output(&s, &["top", "pod", "holder", "--no-headers"], |t| {
        t.split_whitespace()
            .nth(2)
            .and_then(mebibytes)
            .is_some_and(|m| m >= 40)
    });
    assert!(top.starts_with("holder"), "{top}");

    // `setpoint agent-shim` takes the pod's identity (through its `--exec-as` helper).
    wait_output(&s, &["logs", "someone"], |t| {
        t.trim() == "1000 3000 3000 4000"
    });

    // `shareProcessNamespace`: exec lands in the pod's PID namespace; PID 1 is the pod's
    // init and `/proc` lists the pod's processes only (both containers, not the server).
    let seen = wait_output(
        &s,
        &[
            "exec",
            "sharing",
            "-c",
            "app",
            "--",
            "sh",
            "-c",
            "tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/[0-9]*/cmdline | tr '\\0' ' '",
        ],
        |t| t.contains("sleep 1001"),
    );
    assert!(seen.contains("--pod-init-reaper"), "{seen}");
    assert!(!seen.contains("setpoint server"), "{seen}");
}
