//! Service endpoints end to end: a Service over two pods on simulated nodes (which give pods
//! IPs and readiness), `kubectl get endpointslices` and `kubectl get endpoints` listing their
//! addresses with the resolved port, and both gone with the Service.

use std::time::{Duration, Instant};

use crate::common::Server;

/// Waits until `kubectl args` prints something `check` accepts; returns it.
fn wait_output(s: &Server, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = s.kubectl(args);
        let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && check(&got) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?} printed {got:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

const MANIFEST: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-a, labels: {app: web}}
spec:
  nodeName: sim-0
  containers: [{name: c, image: nginx, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-b, labels: {app: web}}
spec:
  nodeName: sim-1
  containers: [{name: c, image: nginx, ports: [{name: http, containerPort: 8080}]}]
"#;

#[test]
fn kubectl_should_list_a_services_endpoint_slices_and_endpoints() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let s = Server::start_with(&dir, "127.0.0.1:0", &["--simulated-nodes", "2"]);
    wait_output(&s, &["get", "nodes", "-o", "name"], |o| {
        o.contains("sim-0") && o.contains("sim-1")
    });
    s.ok(&[
        "label",
        "nodes",
        "sim-0",
        "topology.kubernetes.io/zone=zone-a",
    ]);
    let out = s.kubectl_stdin(&["apply", "-f", "-"], MANIFEST);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ips = wait_output(
        &s,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].status.podIP}",
        ],
        |o| o.split_whitespace().count() == 2,
    );
    let mut ips: Vec<&str> = ips.split_whitespace().collect();
    ips.sort_unstable();

    let table = wait_output(
        &s,
        &[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
        ],
        |o| ips.iter().all(|ip| o.contains(ip)),
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(row[0].starts_with("web-"), "{table}");
    assert_eq!(row[1..3], ["IPv4", "8080"], "{table}");
    let ready = s.ok(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
        "-o",
        "jsonpath={range .items[*].endpoints[*]}{.targetRef.name}/{.conditions.ready}/{.zone}{\" \"}{end}",
    ]);
    let mut ready: Vec<&str> = ready.split_whitespace().collect();
    ready.sort_unstable();
    assert_eq!(ready, ["web-a/true/zone-a", "web-b/true/"], "{ready:?}");

    let endpoints = wait_output(&s, &["get", "endpoints", "web"], |o| {
        ips.iter().all(|ip| o.contains(&format!("{ip}:8080")))
    });
    assert!(
        endpoints
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("web ")),
        "{endpoints}"
    );

    s.ok(&["delete", "service", "web"]);
    wait_output(
        &s,
        &[
            "get",
            "endpointslices,endpoints",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "name",
        ],
        str::is_empty,
    );
    wait_output(&s, &["get", "endpoints", "-o", "name"], |o| {
        !o.contains("endpoints/web")
    });
}
