//! ResourceQuota, LimitRange and ReplicationController end to end: `kubectl create quota
//! q --hard=pods=3`, three `kubectl run`s, the fourth refused with kube-apiserver's message,
//! `kubectl describe quota` showing used and hard; a LimitRange defaulting a pod's requests;
//! an RC scaled with `kubectl scale rc`.

use std::time::{Duration, Instant};

use crate::common::Server;

/// Waits until `kubectl args` prints `want` (trimmed).
fn wait_output(s: &Server, args: &[&str], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = s.kubectl(args);
        let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?} printed {got:?}, wanted {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_quota_should_refuse_the_fourth_pod_and_a_limit_range_default_requests() {
    let s = Server::start();
    s.ok(&["create", "namespace", "team"]);
    s.ok(&["create", "quota", "q", "--hard=pods=3", "-n", "team"]);
    // The loop fills in the status (admission needs it to charge).
    wait_output(
        &s,
        &[
            "get",
            "quota",
            "q",
            "-n",
            "team",
            "-o",
            "jsonpath={.status.used.pods}",
        ],
        "0",
    );
    for name in ["p1", "p2", "p3"] {
        s.ok(&[
            "run",
            name,
            "--image=busybox",
            "--restart=Never",
            "-n",
            "team",
        ]);
    }
    let refused = s.fails(&[
        "run",
        "p4",
        "--image=busybox",
        "--restart=Never",
        "-n",
        "team",
    ]);
    assert_eq!(
        refused.trim(),
        r#"Error from server (Forbidden): pods "p4" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"#
    );
    let described = s.ok(&["describe", "quota", "q", "-n", "team"]);
    assert!(
        described
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["pods", "3", "3"]),
        "{described}"
    );
    // A pod deleted gives its place back.
    s.ok(&[
        "delete",
        "pod",
        "p1",
        "-n",
        "team",
        "--grace-period=0",
        "--force",
    ]);
    wait_output(
        &s,
        &[
            "get",
            "quota",
            "q",
            "-n",
            "team",
            "-o",
            "jsonpath={.status.used.pods}",
        ],
        "2",
    );
    s.ok(&[
        "run",
        "p4",
        "--image=busybox",
        "--restart=Never",
        "-n",
        "team",
    ]);

    // A LimitRange's default request, seen on a pod that sets none.
    s.ok(&["create", "namespace", "limited"]);
    let range = r#"{"apiVersion":"v1","kind":"LimitRange","metadata":{"name":"lr"},"spec":{"limits":[{"type":"Container","defaultRequest":{"cpu":"100m","memory":"64Mi"},"default":{"cpu":"200m","memory":"128Mi"}}]}}"#;
    let out = s.kubectl_stdin(&["create", "-n", "limited", "-f", "-"], range);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Admission reads LimitRanges from its cache: wait until a dry run is defaulted.
    wait_output(
        &s,
        &[
            "run",
            "probe",
            "--image=busybox",
            "-n",
            "limited",
            "--dry-run=server",
            "-o",
            "jsonpath={.spec.containers[0].resources.requests.cpu}",
        ],
        "100m",
    );
    s.ok(&["run", "d", "--image=busybox", "-n", "limited"]);
    let resources = s.ok(&[
        "get",
        "pod",
        "d",
        "-n",
        "limited",
        "-o",
        "jsonpath={.spec.containers[0].resources.requests.cpu} {.spec.containers[0].resources.limits.memory}",
    ]);
    assert_eq!(resources, "100m 128Mi");
    let note = s.ok(&[
        "get",
        "pod",
        "d",
        "-n",
        "limited",
        "-o",
        r"jsonpath={.metadata.annotations.kubernetes\.io/limit-ranger}",
    ]);
    assert_eq!(note, "LimitRanger plugin set: cpu, memory request for container d; cpu, memory limit for container d");
}

const RC: &str = r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"app":"web"},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#;

#[test]
fn a_replication_controller_should_follow_kubectl_scale() {
    let s = Server::start();
    let out = s.kubectl_stdin(&["create", "-f", "-"], RC);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let count = |s: &Server| {
        s.ok(&["get", "pods", "-l", "app=web", "-o", "name"])
            .lines()
            .count()
            .to_string()
    };
    let wait_pods = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while count(&s) != n.to_string() {
            assert!(
                Instant::now() < deadline,
                "pods of web stayed {}, wanted {n}",
                count(&s)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_pods(2);
    s.ok(&["scale", "rc", "web", "--replicas=4"]);
    wait_pods(4);
    wait_output(
        &s,
        &["get", "rc", "web", "-o", "jsonpath={.status.replicas}"],
        "4",
    );
    s.ok(&["scale", "rc", "web", "--replicas=1"]);
    wait_output(
        &s,
        &["get", "rc", "web", "-o", "jsonpath={.status.replicas}"],
        "1",
    );
    let table = s.ok(&["get", "rc", "web"]);
    assert!(
        table.lines().nth(1).is_some_and(|l| l.starts_with("web")),
        "{table}"
    );
}
