//! A LoadBalancer Service end to end: `setpoint server` (pods in bridge mode, so two replicas
//! listen on one port; root only) with a test-chosen `--lb-address-pool`. A Deployment of two
//! HTTP servers behind a LoadBalancer Service answers on its ingress address from both
//! replicas; after a rollout the answers come from the new pods; a balancer killed with
//! SIGKILL comes back and answers; a Service of another `loadBalancerClass` is left alone; a
//! Service turned `ClusterIP` loses its balancer, ingress and finalizer; a deleted Service's
//! balancer process is gone with it.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::processes::processes_with;
use crate::common::Server;

/// Kills what the test leaves (the server is killed, not stopped, so its balancers live on):
/// the balancers of the data directory, its pods, its Service table.
struct Leftovers(PathBuf);

impl Drop for Leftovers {
    fn drop(&mut self) {
        let needle = self.0.join("providers").display().to_string();
        for pid in processes_with(&needle) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
        let _ = std::process::Command::new(setpoint_testenv::process::setpoint_binary())
            .args(["agent", "cleanup", "--grace-period", "0s", "--data-dir"])
            .arg(&self.0)
            .stdout(std::process::Stdio::null())
            .status();
        // The balancers' kernel tables (their processes were killed, not stopped).
        for service in ["web", "web2"] {
            let config = self
                .0
                .join("providers/lb")
                .join(format!("default_{service}"))
                .join("config.json");
            setpoint_providers::lb::proxy::kernel::remove_table(&config);
        }
        if let Ok(table) = std::fs::read_to_string(self.0.join("agent").join("proxy-nft-table")) {
            let _ = std::process::Command::new("nft")
                .args(["delete", "table", "ip", table.trim()])
                .output();
        }
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

/// The body of `GET /` at `at`, if it answers within a second or two.
fn get(at: &str) -> Option<String> {
    let addr: SocketAddr = at.parse().ok()?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.split("\r\n\r\n").nth(1).map(|b| b.trim().to_owned())
}

/// What the Services, pods and balancers look like, for a failure's message.
fn diagnose(s: &Server) -> String {
    let objects = s.kubectl(&["get", "svc,pods,endpointslices", "-o", "wide"]);
    let mut out = String::from_utf8_lossy(&objects.stdout).into_owned();
    let services = s.kubectl(&["get", "svc", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status} {.metadata.annotations}{\"\\n\"}{end}"]);
    out.push_str(&String::from_utf8_lossy(&services.stdout));
    let balancers = s.dir.join("providers/lb");
    for entry in std::fs::read_dir(&balancers)
        .into_iter()
        .flatten()
        .flatten()
    {
        for file in ["pid", "config.json.state", "balancer.log"] {
            let text = std::fs::read_to_string(entry.path().join(file)).unwrap_or_default();
            let tail: String = text.lines().rev().take(10).collect::<Vec<_>>().join(" | ");
            out.push_str(&format!("{}/{file}: {tail}\n", entry.path().display()));
        }
    }
    out
}

/// Asks `at` until two different pods whose answers end with `version` have answered (90 s
/// at most); returns them.
fn two_answer(s: &Server, at: &str, version: &str) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen = BTreeSet::new();
    loop {
        if let Some(answer) = get(at) {
            if answer.ends_with(version) {
                seen.insert(answer);
            }
        }
        if seen.len() >= 2 {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "{at}: only {seen:?} answered with {version}\n{}",
            diagnose(s)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (90 s at most) until `kubectl args` prints something `check` accepts; returns it.
fn wait_kubectl(s: &Server, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = s.kubectl(args);
        let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && check(&got) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?} printed {got:?}; stderr {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            diagnose(s)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The pid in a balancer's pid file, if it names a live process.
fn balancer_pid(data: &Path, service: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(
        data.join("providers/lb")
            .join(format!("default_{service}"))
            .join("pid"),
    )
    .ok()?
    .trim()
    .parse()
    .ok()?;
    std::path::Path::new(&format!("/proc/{pid}/cmdline"))
        .exists()
        .then_some(pid)
}

fn wait_until(s: &Server, what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}\n{}", diagnose(s));
        std::thread::sleep(Duration::from_millis(100));
    }
}

const WEB: &str = r#"
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
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: VERSION, value: v1}
        command: ["sh", "-c", "d=$(mktemp -d) && echo $POD_NAME $VERSION > $d/index.html && cd $d && exec python3 -m http.server 8080 --bind 0.0.0.0"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web2}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: 8081, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: elsewhere}
spec:
  type: LoadBalancer
  loadBalancerClass: example.com/other
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
"#;

#[test]
fn a_load_balancer_should_answer_follow_a_rollout_come_back_and_go_with_its_service() {
    if !is_root() {
        eprintln!("skipped: two replicas on one port need pod networking (root)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let _leftovers = Leftovers(data.clone());
    // A pod range and an address block of this test's own: the pod range outside the
    // Service CIDR (10.96.0.0/12, which the agents route and guard), the default pod range
    // (10.244) and the one of the pods_kubectl tests (10.150-199).
    let octet = 200 + std::process::id() % 40;
    let block = 101 + std::process::id() % 99;
    let pool = format!("127.0.{block}.10-127.0.{block}.19");
    let s = Server::start_with(
        &data,
        "127.0.0.1:0",
        &[
            "--cluster-cidr",
            &format!("10.{octet}.0.0/16"),
            "--lb-address-pool",
            &pool,
            "--managed-poll-interval",
            "2s",
        ],
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], WEB);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The ingress address is the pool's first; both replicas answer on it.
    let ip = wait_kubectl(
        &s,
        &[
            "get",
            "svc",
            "web",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ],
        |o| o.starts_with(&format!("127.0.{block}.")),
    );
    let ingress = s.ok(&[
        "get",
        "svc",
        "web",
        "-o",
        "jsonpath={.status.loadBalancer.ingress[0]}",
    ]);
    assert!(ingress.contains(r#""ipMode":"VIP""#), "{ingress}");
    assert!(ingress.contains(r#""port":80"#), "{ingress}");
    let finalizers = s.ok(&["get", "svc", "web", "-o", "jsonpath={.metadata.finalizers}"]);
    assert!(
        finalizers.contains("service.kubernetes.io/load-balancer-cleanup"),
        "{finalizers}"
    );
    let at = format!("{ip}:80");
    let v1 = two_answer(&s, &at, "v1");
    // As root the kernel forwards (a loopback address in front of pods on the bridge:
    // route_localnet on the bridge, masquerade, the localnet guard).
    let state = data.join("providers/lb/default_web/config.json.state");
    wait_until(&s, "the kernel forwarding web's port", || {
        std::fs::read_to_string(&state)
            .is_ok_and(|t| t.contains("\"kernel\"") && t.contains("TCP/80"))
    });
    let guard = std::process::Command::new("nft")
        .args([
            "list",
            "table",
            "ip",
            setpoint_providers::lb::proxy::kernel::GUARD_TABLE,
        ])
        .output()
        .expect("nft ran");
    assert!(guard.status.success(), "the localnet guard exists");

    // A Service of another class gets nothing from this loop.
    let other = s.ok(&[
        "get",
        "svc",
        "elsewhere",
        "-o",
        "jsonpath={.status.loadBalancer}{.metadata.finalizers}",
    ]);
    assert!(
        !other.contains("ingress") && !other.contains("cleanup"),
        "{other}"
    );

    // A rollout: the answers follow the new pods.
    s.ok(&["set", "env", "deployment/web", "VERSION=v2"]);
    let v2 = two_answer(&s, &at, "v2");
    let pods = |answers: &BTreeSet<String>| -> BTreeSet<String> {
        answers
            .iter()
            .filter_map(|a| a.split_whitespace().next().map(str::to_owned))
            .collect()
    };
    assert!(pods(&v1).is_disjoint(&pods(&v2)), "{v1:?} then {v2:?}");

    // SIGKILL the balancer: a new one answers.
    let pid = balancer_pid(&data, "web").expect("a balancer running");
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    wait_until(&s, "a new balancer", || {
        balancer_pid(&data, "web").is_some_and(|p| p != pid)
    });
    two_answer(&s, &at, "v2");

    // web2 turned ClusterIP: its balancer, ingress and finalizer go.
    let ip2 = wait_kubectl(
        &s,
        &[
            "get",
            "svc",
            "web2",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ],
        |o| o.starts_with(&format!("127.0.{block}.")),
    );
    assert_ne!(ip, ip2, "two Services, two addresses");
    two_answer(&s, &format!("{ip2}:8081"), "v2");
    s.ok(&[
        "patch",
        "svc",
        "web2",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/type","value":"ClusterIP"},{"op":"remove","path":"/spec/ports/0/nodePort"}]"#,
    ]);
    wait_kubectl(
        &s,
        &[
            "get",
            "svc",
            "web2",
            "-o",
            "jsonpath={.status.loadBalancer}|{.metadata.finalizers}",
        ],
        |o| !o.contains("ingress") && !o.contains("load-balancer-cleanup"),
    );
    assert!(
        balancer_pid(&data, "web2").is_none(),
        "web2's balancer stopped"
    );
    assert!(get(&format!("{ip2}:8081")).is_none());

    // Deleting the Service stops its balancer and lets it go.
    let pid = balancer_pid(&data, "web").expect("a balancer running");
    s.ok(&["delete", "svc", "web", "--timeout=60s"]);
    wait_until(&s, "the balancer gone", || {
        !Path::new(&format!("/proc/{pid}/cmdline")).exists()
    });
    assert!(s.fails(&["get", "svc", "web"]).contains("NotFound"));
    assert!(get(&at).is_none(), "nothing answers on {at}");
}
