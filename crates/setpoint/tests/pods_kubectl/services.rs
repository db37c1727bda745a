//! Services through the local agent's proxy: two pods behind a NodePort Service answer with
//! their names; the spread is seen through the ClusterIP (nftables mode, root with `nft`) and
//! through the NodePort on 127.0.0.1 (both modes), `sessionAffinity: ClientIP` sticks; the
//! agent's resolver answers the Service's name over UDP and TCP. The userspace fallback is
//! forced in a second server (`--proxy-mode userspace`), so it is tested as root too.
//!
//! The first two tests run pods on the host network (`--pod-network host`), so both pods
//! listen on 127.0.0.1, each on its own port, published under the same port name: the
//! Service's named `targetPort` resolves per pod. The third (root only) runs them in bridge
//! mode: a Deployment's two replicas on one port, reached through the ClusterIP from the host
//! and, by the Service's name (the agent's resolver on the bridge), from a pod.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::processes::Cleanup;
use crate::common::{free_loopback_addr, Server};
use crate::pods_kubectl::kit::{wait_kubectl, AgentCleanup};

fn free_port() -> u16 {
    free_loopback_addr()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

/// Pods `web-a` and `web-b` (HTTP servers answering their name) and the NodePort Service `web`.
/// `offset` keeps the NodePorts of these tests apart (an nftables NodePort binds no
/// socket, so a free-port check cannot see another test's).
fn manifests(work: &Path, marker: &str, offset: u16) -> String {
    let mut out = String::new();
    for pod in ["web-a", "web-b"] {
        // The marker in the directory puts it on the server's command line (for `Cleanup`).
        let dir = work.join(marker).join(pod);
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("index.html"), pod).expect("index");
        let port = free_port();
        out.push_str(&format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}, labels: {{app: web}}}}
spec:
  nodeName: local
  terminationGracePeriodSeconds: 1
  containers:
  - name: http
    image: python
    command: ["/usr/bin/python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1", "--directory", "{dir}"]
    ports: [{{name: http, containerPort: {port}}}]
---"#,
            dir = dir.display(),
        ));
    }
    // The API server does not allocate NodePorts: the test picks a free one.
    let node_port = free_node_port(offset);
    out.push_str(&format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  type: NodePort
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: http, nodePort: {node_port}}}]
"#
    ));
    out
}

/// A port of the NodePort range free on 127.0.0.1 now.
fn free_node_port(offset: u16) -> u16 {
    let start = 30_000 + u16::try_from(std::process::id() % 1_000).unwrap_or(0) + offset;
    (start..32_767)
        .chain(30_000..start)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free NodePort")
}

/// The body of `GET /` at `at`, if it answers within a second.
fn get(at: &str) -> Option<String> {
    let addr: SocketAddr = at.parse().ok()?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.split("\r\n\r\n").nth(1).map(|b| b.trim().to_owned())
}

/// Asks `at` until both pods have answered (60 s at most).
fn both_answer(at: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = BTreeSet::new();
    while seen.len() < 2 {
        assert!(Instant::now() < deadline, "{at}: only {seen:?} answered");
        match get(at) {
            Some(name) => {
                seen.insert(name);
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from(["web-a".to_owned(), "web-b".to_owned()])
    );
}

/// Twelve answers in a row from `at`, all the same pod.
fn sticks(at: &str) {
    let answers: BTreeSet<String> = (0..12).filter_map(|_| get(at)).collect();
    assert_eq!(
        answers.len(),
        1,
        "{at} with ClientIP affinity answered {answers:?}"
    );
}

fn jsonpath(s: &Server, path: &str) -> String {
    let out = s.kubectl(&["get", "svc", "web", "-o", &format!("jsonpath={path}")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Applies the pods and the Service; returns (cluster IP, node port).
fn deploy(s: &Server, work: &Path, marker: &str, offset: u16) -> (String, String) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &manifests(work, marker, offset));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        jsonpath(s, "{.spec.clusterIP}"),
        jsonpath(s, "{.spec.ports[0].nodePort}"),
    )
}

/// Polls until `check` holds for the agent's nftables table listing.
fn wait_table(s: &Server, check: impl Fn(&str) -> bool) {
    let name_file = s.dir.join("agent").join("proxy-nft-table");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listing = std::fs::read_to_string(&name_file).ok().and_then(|table| {
            let out = std::process::Command::new("nft")
                .args(["list", "table", "ip", table.trim()])
                .output()
                .ok()?;
            Some(String::from_utf8_lossy(&out.stdout).into_owned())
        });
        if listing.as_deref().is_some_and(&check) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the Service table never matched: {listing:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn set_affinity(s: &Server) {
    let out = s.kubectl(&[
        "patch", "svc", "web", "-p",
        r#"{"spec":{"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":60}}}}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Deletes the agent's nftables table when the test ends (its server is killed, not stopped,
/// and owns no data directory to clean up).
struct DropTable(std::path::PathBuf);

impl Drop for DropTable {
    fn drop(&mut self) {
        if let Ok(table) = std::fs::read_to_string(self.0.join("agent").join("proxy-nft-table")) {
            let _ = std::process::Command::new("nft")
                .args(["delete", "table", "ip", table.trim()])
                .output();
        }
    }
}

/// Waits until `kubectl describe node local` shows the `ServiceProxy` condition with
/// `status` and `reason`.
fn proxy_condition(s: &Server, status: &str, reason: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = s.kubectl(&["describe", "node", "local"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("ServiceProxy"))
            .map(str::to_owned);
        if row
            .as_deref()
            .is_some_and(|r| r.contains(status) && r.contains(reason))
        {
            return;
        }
        assert!(Instant::now() < deadline, "ServiceProxy condition: {row:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn nftables_here() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // /proc/self belongs to the effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
        && std::process::Command::new("nft")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

#[test]
fn a_service_should_spread_over_its_pods_stick_with_affinity_and_resolve_by_name() {
    let dns = free_loopback_addr();
    let upstream = fake_upstream();
    let tmp = tempfile::tempdir().expect("tempdir");
    let _stop = AgentCleanup(tmp.path().join("data"));
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &[
            "--dns-listen",
            &dns,
            "--dns-upstream",
            &upstream,
            "--pod-network",
            "host",
        ],
    );
    let _table = DropTable(s.dir.clone());
    let marker = format!("svc-test-{}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let (cluster_ip, node_port) = deploy(&s, tmp.path(), &marker, 0);

    // The resolver answers the Service's name with its cluster IP, over UDP and TCP.
    let ip: std::net::Ipv4Addr = cluster_ip.parse().expect("an IPv4 cluster IP");
    let deadline = Instant::now() + Duration::from_secs(30);
    while dns_udp(&dns, "web.default.svc.cluster.local") != Some(ip) {
        assert!(Instant::now() < deadline, "no A record for web over UDP");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(dns_tcp(&dns, "web.default.svc.cluster.local"), Some(ip));
    // Names outside the cluster domain go to `--dns-upstream`, the client's ID restored.
    let outside = Some(std::net::Ipv4Addr::new(192, 0, 2, 7));
    assert_eq!(dns_udp(&dns, "outside.example"), outside);
    assert_eq!(dns_tcp(&dns, "outside-tcp.example"), outside);

    let node_port_at = format!("127.0.0.1:{node_port}");
    if nftables_here() {
        // Only once the rules (and their guard against routing the Service CIDR out) exist.
        wait_table(&s, |t| {
            t.contains(&format!("{cluster_ip} . tcp . 80"))
                && t.matches("dnat ip to numgen").count() == 1
        });
        both_answer(&format!("{cluster_ip}:80"));
        both_answer(&node_port_at);
        proxy_condition(&s, "True", "Nftables");
        set_affinity(&s);
        wait_table(&s, |t| t.contains("aff-default/web/tcp/80"));
        sticks(&format!("{cluster_ip}:80"));
        sticks(&node_port_at);
    } else {
        eprintln!("ClusterIP part skipped: needs root and nft (userspace mode: NodePorts only)");
        both_answer(&node_port_at);
        set_affinity(&s);
        std::thread::sleep(Duration::from_millis(500));
        sticks(&node_port_at);
    }
}

#[test]
fn the_userspace_fallback_should_serve_node_ports_on_loopback() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let _stop = AgentCleanup(tmp.path().join("data"));
    let s = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--proxy-mode", "userspace", "--pod-network", "host"],
    );
    let marker = format!("svc-user-{}", std::process::id());
    let _cleanup = Cleanup {
        marker: marker.clone(),
        agent_root: s.dir.join("agent").display().to_string(),
    };
    let (_, node_port) = deploy(&s, tmp.path(), &marker, 1_000);
    assert!(
        !s.dir.join("agent").join("proxy-nft-table").exists(),
        "no nftables in userspace mode"
    );
    // `kubectl describe node` says which mode and why.
    proxy_condition(&s, "False", "Userspace");
    let at = format!("127.0.0.1:{node_port}");
    both_answer(&at);
    set_affinity(&s);
    // The listener picks the new setting up on the next sync; a few answers may predate it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answers: BTreeSet<String> = (0..8).filter_map(|_| get(&at)).collect();
        if answers.len() == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "affinity never held: {answers:?}"
        );
    }
}

/// A DNS query for `name` A (id 0x1234, recursion desired).
fn dns_query(name: &str) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        q.push(u8::try_from(label.len()).expect("short label"));
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// The first A record of a NOERROR answer to [`dns_query`] (the answer's owner is the
/// compressed pointer to the question: 2 bytes).
fn first_a(reply: &[u8], query_len: usize) -> Option<std::net::Ipv4Addr> {
    if reply.len() < query_len + 16 || reply[0..2] != [0x12, 0x34] || reply[3] & 0x0f != 0 {
        return None;
    }
    let answers = u16::from_be_bytes([reply[6], reply[7]]);
    let rr = &reply[query_len..];
    (answers > 0 && rr[2..4] == [0, 1] && rr[10..12] == [0, 4])
        .then(|| std::net::Ipv4Addr::new(rr[12], rr[13], rr[14], rr[15]))
}

/// A UDP and TCP DNS server on 127.0.0.1 answering every query with A `192.0.2.7` (its
/// threads end with the test process).
fn fake_upstream() -> String {
    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind a fake upstream");
    let at = udp.local_addr().expect("its address");
    let tcp = std::net::TcpListener::bind(at).expect("bind its TCP port");
    let answer = |query: &[u8]| {
        let mut reply = query.to_vec();
        reply[2] |= 0x80;
        reply[3] = 0x80;
        reply[6..8].copy_from_slice(&[0, 1]);
        reply.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7]);
        reply
    };
    std::thread::spawn(move || {
        let mut buffer = [0u8; 512];
        while let Ok((len, peer)) = udp.recv_from(&mut buffer) {
            let _ = udp.send_to(&answer(&buffer[..len]), peer);
        }
    });
    std::thread::spawn(move || {
        for mut stream in tcp.incoming().flatten() {
            let mut len = [0u8; 2];
            if stream.read_exact(&mut len).is_err() {
                continue;
            }
            let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
            if stream.read_exact(&mut query).is_err() {
                continue;
            }
            let reply = answer(&query);
            let mut framed = u16::try_from(reply.len())
                .unwrap_or(0)
                .to_be_bytes()
                .to_vec();
            framed.extend_from_slice(&reply);
            let _ = stream.write_all(&framed);
        }
    });
    at.to_string()
}

fn dns_udp(server: &str, name: &str) -> Option<std::net::Ipv4Addr> {
    let socket = UdpSocket::bind("127.0.0.1:0").ok()?;
    socket.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let query = dns_query(name);
    socket.send_to(&query, server).ok()?;
    let mut buffer = [0u8; 512];
    let len = socket.recv(&mut buffer).ok()?;
    first_a(&buffer[..len], query.len())
}

fn dns_tcp(server: &str, name: &str) -> Option<std::net::Ipv4Addr> {
    let mut stream = TcpStream::connect(server).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let query = dns_query(name);
    let mut framed = u16::try_from(query.len()).ok()?.to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    stream.write_all(&framed).ok()?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).ok()?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply).ok()?;
    first_a(&reply, query.len())
}

#[test]
fn in_bridge_mode_a_pod_should_reach_a_service_by_name() {
    if !nftables_here() {
        eprintln!("skipped: needs root and nft");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // A pod range of this test's own (other servers on the machine use the default one).
    let octet = 150 + std::process::id() % 50;
    let data = tmp.path().join("data");
    let _cleanup = AgentCleanup(data.clone());
    let s = Server::start_with(
        &data,
        "127.0.0.1:0",
        &["--cluster-cidr", &format!("10.{octet}.0.0/16")],
    );
    let _table = DropTable(s.dir.clone());
    let web = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: http
        image: python
        env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
        command: ["sh", "-c", "d=$(mktemp -d) && echo $POD_NAME > $d/index.html && cd $d && exec python3 -m http.server 8080 --bind 0.0.0.0"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
"#;
    let out = s.kubectl_stdin(&["apply", "-f", "-"], web);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cluster_ip = jsonpath(&s, "{.spec.clusterIP}");
    wait_kubectl(
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
        |o| o.split_whitespace().count() == 2 && o.starts_with(&format!("10.{octet}.")),
    );
    wait_table(&s, |t| {
        t.contains(&format!("{cluster_ip} . tcp . 80")) && t.contains("numgen random mod 2")
    });
    // From the host, through the route to the bridge.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = BTreeSet::new();
    while seen.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "only {seen:?} answered on {cluster_ip}"
        );
        match get(&format!("{cluster_ip}:80")) {
            Some(name) => {
                seen.insert(name);
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    assert!(seen.iter().all(|n| n.starts_with("web-")), "{seen:?}");
    // The API server allocated the node port; the node's address on the pod bridge (the
    // range's first) answers on it, spread over both pods.
    let node_port: u16 = jsonpath(&s, "{.spec.ports[0].nodePort}")
        .parse()
        .expect("an allocated nodePort");
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    let at = format!("10.{octet}.0.1:{node_port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut through_node_port = BTreeSet::new();
    while through_node_port.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "{at}: only {through_node_port:?} answered"
        );
        match get(&at) {
            Some(name) => {
                through_node_port.insert(name);
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    assert_eq!(
        through_node_port, seen,
        "the node port reaches the same pods"
    );
    // kubectl port-forward to the Service reaches a pod inside its network namespace.
    let local = free_port();
    let mut forward = s
        .kubectl_command()
        .args(["port-forward", "svc/web", &format!("{local}:80")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl port-forward started");
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match get(&format!("127.0.0.1:{local}")) {
            Some(name) => break name,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            None => break String::new(),
        }
    };
    let _ = forward.kill();
    let _ = forward.wait();
    assert!(
        answer.starts_with("web-"),
        "port-forward svc/web answered {answer:?}"
    );
    // From a pod, by name: resolv.conf names the agent's resolver, the search list finds
    // `web` in the pod's namespace; 30 requests see both replicas.
    let client = r#"
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  restartPolicy: Never
  containers:
  - name: get
    image: python
    command: ["python3", "-c", "import socket, urllib.request\nip = socket.gethostbyname('web')\nnames = {urllib.request.urlopen('http://web/', timeout=5).read().decode().strip() for _ in range(30)}\nprint(ip, ' '.join(sorted(names)))"]
"#;
    let out = s.kubectl_stdin(&["apply", "-f", "-"], client);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let phase = wait_kubectl(
        &s,
        &["get", "pod", "client", "-o", "jsonpath={.status.phase}"],
        |o| o == "Succeeded" || o == "Failed",
    );
    let logs = s.kubectl(&["logs", "client"]);
    let logs = String::from_utf8_lossy(&logs.stdout).trim().to_owned();
    assert_eq!(phase, "Succeeded", "client logs: {logs}");
    let words: Vec<&str> = logs.split_whitespace().collect();
    assert_eq!(words.first(), Some(&cluster_ip.as_str()), "{logs}");
    assert_eq!(words.len(), 3, "both replicas answered the pod: {logs}");
}
