//! A 3-replica StatefulSet of real processes: created in order (web-N only once web-(N-1) is
//! running and ready), one claim per pod (provisioned by the local-path provisioner; each pod
//! writes to it), a deleted pod recreated under its name with its claim and finding its
//! predecessor's data there, a rolling update held by a partition (only ordinals ≥ partition move),
//! `kubectl rollout status/history`, then `kubectl rollout undo`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::processes::Cleanup;
use crate::common::Server;

fn statefulset(marker: &str, image: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: web}}
spec:
  replicas: 3
  serviceName: web
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: app
        image: "{image}"
        # Each start appends a line to the pod's claim and prints the whole file, so the
        # log of a recreated pod shows what its predecessor wrote.
        command: ["sh", "-c", "echo \"$POD_NAME started\" >> \"$SETPOINT_VOLUME_DATA/starts\"; cat \"$SETPOINT_VOLUME_DATA/starts\"; while true; do sleep 1; done # {marker}"]
        env:
        - name: POD_NAME
          valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
        volumeMounts:
        - {{name: data, mountPath: /tmp/setpoint-sts-e2e-data}}
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Mi}}}}
"#
    )
}

/// Pod name → (uid, phase, ready, image, claim, terminating) of the pods labelled `app=web`.
type Pods = BTreeMap<String, (String, String, bool, String, String, bool)>;

fn pods(s: &Server) -> Pods {
    let out = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.phase}. {.status.conditions[?(@.type=="Ready")].status}. {.spec.containers[0].image} {.spec.volumes[?(@.name=="data")].persistentVolumeClaim.claimName}. {.metadata.deletionTimestamp}.{"\n"}{end}"#,
    ]);
    out.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let name = (*f.first()?).to_owned();
            Some((
                name,
                (
                    (*f.get(1)?).to_owned(),
                    f.get(2)?.trim_end_matches('.').to_owned(),
                    *f.get(3)? == "True.",
                    (*f.get(4)?).to_owned(),
                    f.get(5)?.trim_end_matches('.').to_owned(),
                    f.get(6).is_some_and(|d| *d != "."),
                ),
            ))
        })
        .collect()
}

/// Polls the pods until `check` accepts them (90 s at most); `invariant` must hold at every
/// poll.
fn wait_pods(
    s: &Server,
    what: &str,
    invariant: impl Fn(&Pods),
    check: impl Fn(&Pods) -> bool,
) -> Pods {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let found = pods(s);
        invariant(&found);
        if check(&found) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "waiting for {what}; pods: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn running_ready(p: &Pods, name: &str) -> bool {
    p.get(name)
        .is_some_and(|(_, phase, ready, _, _, terminating)| {
            phase == "Running" && *ready && !terminating
        })
}

fn all_on(p: &Pods, images: &[(&str, &str)]) -> bool {
    p.len() == images.len()
        && images
            .iter()
            .all(|(name, image)| running_ready(p, name) && p[*name].3 == *image)
}

#[test]
fn statefulset_should_start_in_order_keep_identity_and_roll_with_a_partition() {
    let s = Server::start();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let marker = format!("sts-e2e-{}-{nanos:x}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &statefulset(&marker, "busybox:1"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Created in order: web-N appears only once web-(N-1) is running and ready.
    let ordered = |p: &Pods| {
        for (later, earlier) in [("web-1", "web-0"), ("web-2", "web-1")] {
            if p.contains_key(later) {
                assert!(
                    running_ready(p, earlier),
                    "{later} before {earlier} was ready: {p:?}"
                );
            }
        }
    };
    let first = wait_pods(&s, "3 running pods", ordered, |p| {
        all_on(
            p,
            &[
                ("web-0", "busybox:1"),
                ("web-1", "busybox:1"),
                ("web-2", "busybox:1"),
            ],
        )
    });
    for (name, pod) in &first {
        assert_eq!(pod.4, format!("data-{name}"), "claim of {name}");
    }
    let claims = s.ok(&["get", "pvc", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert_eq!(claims, "data-web-0 data-web-1 data-web-2");
    let hostname = s.ok(&[
        "get",
        "pod",
        "web-1",
        "-o",
        "jsonpath={.spec.hostname}/{.spec.subdomain}",
    ]);
    assert_eq!(hostname, "web-1/web");

    // A deleted pod comes back under its name, with its claim.
    s.ok(&["delete", "pod", "web-1", "--wait=false"]);
    let old_uid = first["web-1"].0.clone();
    let back = wait_pods(
        &s,
        "web-1 recreated",
        |_| {},
        |p| running_ready(p, "web-1") && p["web-1"].0 != old_uid,
    );
    assert_eq!(back["web-1"].4, "data-web-1");
    // The new web-1 found its predecessor's line in the claim: the data survived the delete.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = s.ok(&["logs", "web-1"]);
        if log.matches("web-1 started").count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "log of the new web-1: {log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let claims = s.ok(&["get", "pvc", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert_eq!(
        claims, "data-web-0 data-web-1 data-web-2",
        "the claim was kept, not remade"
    );

    // A rolling update held at partition 2: only web-2 moves.
    s.ok(&[
        "patch",
        "statefulset",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}"#,
    ]);
    s.ok(&["set", "image", "statefulset/web", "app=busybox:2"]);
    let status = s.ok(&["rollout", "status", "statefulset/web", "--timeout=120s"]);
    assert!(status.contains("partitioned roll out complete"), "{status}");
    let rolled = wait_pods(
        &s,
        "web-2 updated",
        |_| {},
        |p| {
            all_on(
                p,
                &[
                    ("web-0", "busybox:1"),
                    ("web-1", "busybox:1"),
                    ("web-2", "busybox:2"),
                ],
            )
        },
    );
    assert_ne!(rolled["web-2"].0, back["web-2"].0, "web-2 was replaced");
    assert_eq!(
        rolled["web-0"].0, first["web-0"].0,
        "web-0 below the partition untouched"
    );
    let history = s.ok(&["rollout", "history", "statefulset/web"]);
    let revisions: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    // Undo: back to busybox:1 (web-2 moves back; the rest never left).
    let undo = s.ok(&["rollout", "undo", "statefulset/web"]);
    assert!(undo.contains("rolled back"), "{undo}");
    wait_pods(
        &s,
        "web-2 back on busybox:1",
        |_| {},
        |p| {
            all_on(
                p,
                &[
                    ("web-0", "busybox:1"),
                    ("web-1", "busybox:1"),
                    ("web-2", "busybox:1"),
                ],
            )
        },
    );
    let image = s.ok(&[
        "get",
        "statefulset",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(image, "busybox:1");
    s.ok(&["rollout", "status", "statefulset/web", "--timeout=120s"]);
}
