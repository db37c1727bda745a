//! Pod networking with `kubectl`: in bridge mode (root only) two replicas of an HTTP server
//! on the same port 8080 both run, each at its own address inside the node's podCIDR,
//! reachable from the host and from another pod, and the node says its pods are isolated; in
//! host-network mode (forced with `--pod-network host`; no root needed) pods get the node's
//! address and `kubectl describe node` shows why they are not isolated.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::common::Server;
use crate::pods_kubectl::kit::{is_root, wait_kubectl, AgentCleanup};

fn apply(s: &Server, manifest: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A plain HTTP/1.0 GET from the host; the status line.
fn http_status(addr: &str) -> String {
    use std::io::{Read as _, Write as _};
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut conn) = std::net::TcpStream::connect(addr) {
            let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = conn.write_all(b"GET / HTTP/1.0\r\n\r\n");
            let mut reply = String::new();
            let _ = conn.read_to_string(&mut reply);
            return reply.lines().next().unwrap_or_default().to_owned();
        }
        assert!(Instant::now() < deadline, "{addr} unreachable");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn deployment(name: &str, replicas: u32, command: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: http
        image: python
        command: ["sh", "-c", "{command}"]
"#
    )
}

#[test]
fn replicas_on_one_port_should_each_get_an_address_in_the_node_pod_cidr() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // A range of this test's own: other servers on this machine use the default one.
    let octet = 200 + std::process::id() % 50;
    let cluster = format!("10.{octet}.0.0/16");
    let _cleanup = AgentCleanup(tmp.path().join("data"));
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--cluster-cidr", &cluster],
    );
    let pod_cidr = wait_kubectl(
        &s,
        &["get", "node", "local", "-o", "jsonpath={.spec.podCIDR}"],
        |o| !o.is_empty(),
    );
    assert_eq!(pod_cidr, format!("10.{octet}.0.0/24"));
    apply(
        &s,
        &deployment("web", 2, "exec python3 -m http.server 8080 --bind 0.0.0.0"),
    );
    let ips = wait_kubectl(
        &s,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "--field-selector",
            "status.phase=Running",
            "-o",
            "jsonpath={.items[*].status.podIP}",
        ],
        |o| o.split_whitespace().count() == 2,
    );
    let ips: Vec<Ipv4Addr> = ips
        .split_whitespace()
        .map(|ip| ip.parse().expect("an IPv4 podIP"))
        .collect();
    assert_ne!(ips[0], ips[1], "distinct pod IPs");
    for ip in &ips {
        assert_eq!(ip.octets()[..3], [10, octet as u8, 0], "{ip} in {pod_cidr}");
        assert!(
            http_status(&format!("{ip}:8080")).contains(" 200 "),
            "{ip}:8080 answers"
        );
    }
    let host_ips = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].status.hostIP}",
    ]);
    assert_eq!(host_ips.trim(), "127.0.0.1 127.0.0.1");

    // Pod → pod by IP.
    let probe = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  restartPolicy: Never
  containers:
  - name: get
    image: python
    command: ["python3", "-c", "import urllib.request; print(urllib.request.urlopen('http://{}:8080/', timeout=10).status)"]
"#,
        ips[0]
    );
    apply(&s, &probe);
    wait_kubectl(
        &s,
        &["get", "pod", "client", "-o", "jsonpath={.status.phase}"],
        |o| o == "Succeeded" || o == "Failed",
    );
    assert_eq!(
        s.ok(&["get", "pod", "client", "-o", "jsonpath={.status.phase}"])
            .trim(),
        "Succeeded",
        "client logs: {}",
        s.ok(&["logs", "client"])
    );
    assert_eq!(s.ok(&["logs", "client"]).trim(), "200");
    let described = s.ok(&["describe", "node", "local"]);
    assert!(
        described
            .lines()
            .any(|l| l.trim_start().starts_with("PodNetworkIsolated") && l.contains("True")),
        "{described}"
    );
}

#[test]
fn host_network_mode_should_give_pods_the_node_address_and_say_so() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let _cleanup = AgentCleanup(tmp.path().join("data"));
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--pod-network", "host"],
    );
    // Pods share the host's network: two servers need two ports.
    let ports: Vec<String> = (0..2)
        .map(|_| {
            crate::common::free_loopback_addr()
                .rsplit_once(':')
                .map(|(_, p)| p.to_owned())
                .expect("a port")
        })
        .collect();
    for (i, port) in ports.iter().enumerate() {
        apply(
            &s,
            &deployment(
                &format!("host{i}"),
                1,
                &format!("exec python3 -m http.server {port} --bind 127.0.0.1"),
            ),
        );
    }
    for (i, port) in ports.iter().enumerate() {
        let ip = wait_kubectl(
            &s,
            &[
                "get",
                "pods",
                "-l",
                &format!("app=host{i}"),
                "--field-selector",
                "status.phase=Running",
                "-o",
                "jsonpath={.items[*].status.podIP}",
            ],
            |o| !o.is_empty(),
        );
        assert_eq!(ip, "127.0.0.1");
        assert!(http_status(&format!("127.0.0.1:{port}")).contains(" 200 "));
    }
    let described = wait_kubectl(&s, &["describe", "node", "local"], |o| {
        o.contains("PodNetworkIsolated")
    });
    let line = described
        .lines()
        .find(|l| l.trim_start().starts_with("PodNetworkIsolated"))
        .expect("the condition's row");
    assert!(
        line.contains("False") && line.contains("HostNetwork"),
        "{line}"
    );
}
