//! A DaemonSet over the local node (a real process) and 5 simulated nodes, one tainted and one
//! selected out: a pod on each of the other four, rolled to a new image with `kubectl rollout
//! status` waiting for it, `kubectl rollout history`, then `kubectl rollout undo`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::processes::{processes_with, Cleanup};
use crate::common::Server;

fn daemonset(marker: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      terminationGracePeriodSeconds: 2
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{{key: daemons, operator: NotIn, values: ["off"]}}]
      containers:
      - name: c
        image: "busybox:1"
        command: ["sh", "-c", "while true; do sleep 1; done # {marker}"]
"#
    )
}

/// Node → images of the live, running and ready pods labelled `app=agent` on it.
fn placed(s: &Server) -> BTreeMap<String, Vec<String>> {
    let out = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=agent",
        "-o",
        r#"jsonpath={range .items[*]}{.spec.nodeName}. {.status.phase}. {.status.conditions[?(@.type=="Ready")].status}. {.spec.containers[0].image} {.metadata.deletionTimestamp}.{"\n"}{end}"#,
    ]);
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 5 || f[1] != "Running." || f[2] != "True." || f[4] != "." {
            continue;
        }
        map.entry(f[0].trim_end_matches('.').to_owned())
            .or_default()
            .push(f[3].to_owned());
    }
    map
}

fn wait_placed(s: &Server, image: &str, nodes: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let found = placed(s);
        let ok = found.keys().map(String::as_str).eq(nodes.iter().copied())
            && found.values().all(|images| images == &[image.to_owned()]);
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waiting for {image} on {nodes:?}; found {found:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn daemonset_should_cover_eligible_nodes_and_roll_with_rollout_status() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let s = Server::start_with(&dir, "127.0.0.1:0", &["--simulated-nodes", "5"]);
    let marker = format!("ds-e2e-{}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.ok(&["get", "nodes", "-o", "name"]).lines().count() < 6 {
        assert!(Instant::now() < deadline, "six nodes did not register");
        std::thread::sleep(Duration::from_millis(200));
    }
    s.ok(&["taint", "nodes", "sim-4", "dedicated=db:NoSchedule"]);
    s.ok(&["label", "nodes", "sim-3", "daemons=off"]);
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &daemonset(&marker));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let eligible = ["local", "sim-0", "sim-1", "sim-2"];
    let status = s.ok(&["rollout", "status", "daemonset/agent", "--timeout=120s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    wait_placed(&s, "busybox:1", &eligible);
    assert_eq!(
        processes_with(&marker).len(),
        1,
        "one real process, on the local node"
    );
    let desired = s.ok(&["get", "ds", "agent", "-o", "jsonpath={.status.desiredNumberScheduled}/{.status.numberAvailable}/{.status.numberMisscheduled}"]);
    assert_eq!(desired, "4/4/0");

    s.ok(&["set", "image", "daemonset/agent", "c=busybox:2"]);
    let status = s.ok(&["rollout", "status", "daemonset/agent", "--timeout=120s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    wait_placed(&s, "busybox:2", &eligible);
    let history = s.ok(&["rollout", "history", "daemonset/agent"]);
    let revisions: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    let undo = s.ok(&["rollout", "undo", "daemonset/agent"]);
    assert!(undo.contains("rolled back"), "{undo}");
    s.ok(&["rollout", "status", "daemonset/agent", "--timeout=120s"]);
    wait_placed(&s, "busybox:1", &eligible);
    let image = s.ok(&[
        "get",
        "ds",
        "agent",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(image, "busybox:1");
}
