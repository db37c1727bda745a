//! Several `setpoint server` processes on one etcd, driven by the real `kubectl`: they share the
//! cluster's credentials (the second server's `pki` copied from the first), serve the same
//! objects, and a write through one reaches the other's watchers in order; the controllers and
//! the scheduler act in one process at a time (their Leases), and when that process is killed
//! the other takes the Leases over and a Deployment keeps converging, with no duplicate
//! ReplicaSet or pod. Nodes come from a third process that runs only the agent role.

#![cfg(feature = "etcd")]
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic

mod common;

use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Server;
use setpoint_store::LocalEtcd;
use setpoint_testenv::eventually_blocking;

const DEADLINE: Duration = Duration::from_secs(60);

/// Short leases, so that a takeover happens within a few seconds.
const LEADER_FLAGS: &[&str] = &[
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "500ms",
];

fn start_etcd() -> LocalEtcd {
    LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"))
}

/// Starts a server on `dir` over `etcd` with `extra` flags.
fn start_server(dir: &Path, etcd: &LocalEtcd, extra: &[&str]) -> Server {
    let mut args = vec!["--store", "etcd", "--etcd-endpoints", etcd.endpoint()];
    args.extend_from_slice(extra);
    Server::start_with(dir, "127.0.0.1:0", &args)
}

/// Copies the cluster's credentials of `from` into the data directory `to`, as a second
/// server of the cluster must have them before its first start.
fn copy_pki(from: &Path, to: &Path) {
    let target = to.join("pki");
    std::fs::create_dir_all(&target).unwrap();
    for name in ["ca.crt", "ca.key", "admin.crt", "admin.key", "admin.token"] {
        std::fs::copy(from.join("pki").join(name), target.join(name)).unwrap();
    }
}

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_servers_on_one_etcd_should_share_trust_and_objects_and_watches() {
    let etcd = start_etcd();
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let api_only = ["--no-agent", "--controllers="];
    let a = start_server(&dir_a, &etcd, &api_only);
    copy_pki(&dir_a, &dir_b);
    let b = start_server(&dir_b, &etcd, &api_only);

    // One CA, one admin: A's kubeconfig works against B's address.
    assert_eq!(
        std::fs::read(dir_a.join("pki/ca.crt")).unwrap(),
        std::fs::read(dir_b.join("pki/ca.crt")).unwrap()
    );
    let via_b = a.ok(&[
        "--server",
        &b.url(),
        "get",
        "ns",
        "kube-system",
        "-o",
        "name",
    ]);
    assert_eq!(via_b.trim(), "namespace/kube-system");

    // A watch through B, from the start.
    let mut watch = Process(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(b.kubeconfig())
            .args([
                "get",
                "cm",
                "-w",
                "--output-watch-events",
                "--request-timeout=60s",
                "-o",
                "json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // `{"type": …, "object": …}` documents, one per event.
    let mut events =
        serde_json::Deserializer::from_reader(BufReader::new(watch.0.stdout.take().unwrap()))
            .into_iter::<serde_json::Value>();
    // The watch is established once the marker written through B shows up.
    b.ok(&["create", "configmap", "marker"]);
    let mut next_event = move || {
        let event = events.next().expect("watch output ended early").unwrap();
        let object = &event["object"]["metadata"];
        (
            event["type"].as_str().unwrap_or_default().to_owned(),
            object["name"].as_str().unwrap_or_default().to_owned(),
            object["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .parse::<u64>()
                .unwrap(),
        )
    };
    assert_eq!(next_event().1, "marker");

    // Writes through A, each answered with its resourceVersion.
    let rv_of = |out: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(out).unwrap();
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut written = Vec::new();
    for i in 0..5 {
        let name = format!("c{i}");
        let out = a.ok(&[
            "create",
            "configmap",
            &name,
            "--from-literal=i=x",
            "-o",
            "json",
        ]);
        written.push(("ADDED".to_owned(), name.clone(), rv_of(&out)));
        let patch = r#"{"metadata":{"labels":{"step":"2"}}}"#;
        let out = a.ok(&[
            "patch",
            "cm",
            &name,
            "--type=merge",
            "-p",
            patch,
            "-o",
            "json",
        ]);
        written.push(("MODIFIED".to_owned(), name, rv_of(&out)));
    }
    a.ok(&["delete", "cm", "c0"]);
    written.push(("DELETED".to_owned(), "c0".to_owned(), 0));

    let mut seen = Vec::new();
    while seen.len() < written.len() {
        seen.push(next_event());
    }
    drop(watch);
    // Same events, same order, same resourceVersions (a delete's is the deletion's own).
    for (saw, wrote) in seen.iter().zip(&written) {
        assert_eq!((&saw.0, &saw.1), (&wrote.0, &wrote.1), "{seen:?}");
        if wrote.2 != 0 {
            assert_eq!(saw.2, wrote.2, "{seen:?}");
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0].2 < w[1].2),
        "resourceVersions not increasing: {seen:?}"
    );

    // A read through B is as fresh as the write through A.
    let patch = r#"{"metadata":{"annotations":{"fresh":"yes"}}}"#;
    let out = a.ok(&[
        "patch",
        "cm",
        "c1",
        "--type=merge",
        "-p",
        patch,
        "-o",
        "json",
    ]);
    let through_b = b.ok(&["get", "cm", "c1", "-o", "json"]);
    assert_eq!(rv_of(&through_b), rv_of(&out));
}

/// The holder of a Lease in kube-system, if any.
fn holder(server: &Server, lease: &str) -> Option<String> {
    let out = server.kubectl(&[
        "get",
        "lease",
        "-n",
        "kube-system",
        lease,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// Whether `identity` names the process `pid` (`host_pid_random`).
fn is_process(identity: &str, pid: u32) -> bool {
    identity.contains(&format!("_{pid}_"))
}

/// Pod names, their node and phase, of the Deployment `web`.
fn web_pods(server: &Server) -> Vec<(String, String, String)> {
    let out = server.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{\"\\n\"}{end}",
    ]);
    out.lines()
        .map(|l| {
            let mut w = l.split_whitespace().map(str::to_owned);
            (
                w.next().unwrap_or_default(),
                w.next().unwrap_or_default(),
                w.next().unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until `web` has exactly `replicas` pods, all Running and bound, in one ReplicaSet.
fn converged(server: &Server, replicas: usize) {
    eventually_blocking(&format!("{replicas} Running pods of web"), || {
        let pods = web_pods(server);
        let running = pods
            .iter()
            .filter(|(_, node, phase)| phase == "Running" && !node.is_empty())
            .count();
        (pods.len() == replicas && running == replicas).then_some(())
    });
    let rs = server.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(rs.lines().count(), 1, "ReplicaSets: {rs}");
}

#[test]
fn a_killed_leader_should_be_replaced_and_the_deployment_keep_converging() {
    let etcd = start_etcd();
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut flags = vec!["--roles", "apiserver,controllers,scheduler"];
    flags.extend_from_slice(LEADER_FLAGS);
    let a = start_server(&dir_a, &etcd, &flags);
    // A leads before B starts.
    let a_pid = a.pid().unwrap();
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        let identity = eventually_blocking(&format!("A to hold {lease}"), || holder(&a, lease));
        assert!(is_process(&identity, a_pid), "{lease} held by {identity}");
    }
    copy_pki(&dir_a, &dir_b);
    let b = start_server(&dir_b, &etcd, &flags);
    let b_pid = b.pid().unwrap();

    // Nodes from a process with the agent role alone, talking to B (which survives).
    let agent = Process(
        Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .args(["server", "--roles", "agent", "--no-agent"])
            .args(["--simulated-nodes", "2", "--kubeconfig"])
            .arg(b.kubeconfig())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );

    b.ok(&[
        "create",
        "deployment",
        "web",
        "--image=example.invalid/web:1",
        "--replicas=3",
    ]);
    converged(&b, 3);
    // B stands by: the Leases still name A.
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        let identity = holder(&b, lease).expect("a holder");
        assert!(is_process(&identity, a_pid), "{lease} held by {identity}");
    }

    // The leader dies without releasing its Leases; B takes both over.
    let mut a = a;
    a.kill();
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        let identity = eventually_blocking(&format!("B to take {lease} over"), || {
            holder(&b, lease).filter(|h| is_process(h, b_pid))
        });
        assert!(!is_process(&identity, a_pid));
    }

    // Work continues under the new leader, without duplicates.
    b.ok(&["scale", "deployment", "web", "--replicas=5"]);
    converged(&b, 5);
    b.ok(&[
        "set",
        "image",
        "deployment/web",
        "web=example.invalid/web:2",
    ]);
    eventually_blocking("the rollout to web:2", || {
        let out = b.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.updatedReplicas} {.status.readyReplicas} {.status.replicas}",
        ]);
        (out.trim() == "5 5 5").then_some(())
    });
    let rs = b.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(rs.lines().count(), 2, "ReplicaSets: {rs}");
    drop(agent);
}

/// What one load writer did: creates acknowledged with their resourceVersion, and the names
/// whose create failed (it may or may not have been applied).
#[derive(Default)]
struct Written {
    acked: Vec<(String, u64)>,
    uncertain: Vec<String>,
}

/// Creates ConfigMaps `{prefix}-{i}` in namespace `load` until `stop`, through `client`.
async fn write_load(
    client: setpoint_runtime::Client,
    prefix: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    counts: [std::sync::Arc<std::sync::atomic::AtomicUsize>; 2],
) -> Written {
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::atomic::Ordering;
    let api: kube::Api<ConfigMap> = client.namespaced_api("load");
    let mut written = Written::default();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("{prefix}-{i}");
        i += 1;
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.clone());
        let params = kube::api::PostParams::default();
        let create = api.create(&params, &cm);
        match tokio::time::timeout(Duration::from_secs(15), create).await {
            Ok(Ok(created)) => {
                let rv = created.metadata.resource_version.unwrap_or_default();
                written.acked.push((name, rv.parse().unwrap()));
                for count in &counts {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                written.uncertain.push(name);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    written
}

/// What one watcher saw: every event's type, name and resourceVersion, and any `410 Gone`.
#[derive(Default, Debug)]
struct Watched {
    events: Vec<(String, String, u64)>,
    expired: u32,
    rewatches: u32,
    /// What happened to each watch request: how it failed, or from where it started.
    log: Vec<String>,
}

/// Watches ConfigMaps in `load` from `from`, re-watching from the last resourceVersion seen
/// whenever the stream ends, until it has seen `target` (once that is set, non-zero).
async fn watch_load(
    client: setpoint_runtime::Client,
    from: String,
    target: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> Watched {
    use futures::TryStreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::WatchEvent;
    use std::sync::atomic::Ordering;
    let api: kube::Api<ConfigMap> = client.namespaced_api("load");
    let mut watched = Watched::default();
    let mut rv = from;
    let done = |rv: &str| {
        let target = target.load(Ordering::Relaxed);
        target != 0 && rv.parse::<u64>().unwrap_or(0) >= target
    };
    while !done(&rv) {
        let params = kube::api::WatchParams::default().timeout(5);
        let stream = match api.watch(&params, &rv).await {
            Ok(stream) => {
                watched
                    .log
                    .push(format!("watch from {rv} at event {}", watched.events.len()));
                stream
            }
            Err(e) => {
                watched.log.push(format!("watch from {rv} failed: {e}"));
                watched.rewatches += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        loop {
            match stream.try_next().await {
                Ok(Some(WatchEvent::Added(o))) => {
                    rv = o.metadata.resource_version.clone().unwrap_or_default();
                    let name = o.metadata.name.unwrap_or_default();
                    watched
                        .events
                        .push(("ADDED".into(), name, rv.parse().unwrap_or(0)));
                }
                Ok(Some(WatchEvent::Modified(o))) | Ok(Some(WatchEvent::Deleted(o))) => {
                    rv = o.metadata.resource_version.clone().unwrap_or_default();
                    let name = o.metadata.name.unwrap_or_default();
                    watched
                        .events
                        .push(("OTHER".into(), name, rv.parse().unwrap_or(0)));
                }
                Ok(Some(WatchEvent::Bookmark(b))) => rv = b.metadata.resource_version,
                Ok(Some(WatchEvent::Error(e))) => {
                    if e.code == 410 {
                        watched.expired += 1;
                        return watched;
                    }
                    break;
                }
                Ok(None) | Err(_) => break,
            }
            if done(&rv) {
                return watched;
            }
        }
        watched.rewatches += 1;
    }
    watched
}

/// Starts `setpoint server` with only the roles given, reaching the API servers through the
/// kubeconfig `kubeconfig` and failing over among `servers`.
fn start_role_process(roles: &str, kubeconfig: &Path, servers: &str, extra: &[&str]) -> Process {
    Process(
        Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .args(["server", "--roles", roles, "--no-agent", "--kubeconfig"])
            .arg(kubeconfig)
            .args(["--api-servers", servers])
            .args(LEADER_FLAGS)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

/// The issue's failure test: a three-member etcd cluster, two API servers, two processes
/// running the controllers and the scheduler, one running simulated nodes. Under a steady load
/// of creates through both API servers (a failover client each), with a watcher on each: kill
/// the etcd leader, then an API server, then the leading controller process. Every acknowledged
/// write is there with its resourceVersion, each watcher saw every object exactly once in
/// increasing order without a `410`, and a Deployment keeps converging without duplicates.
#[test]
fn the_cluster_should_survive_an_etcd_member_an_api_server_and_the_leader_dying() {
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::Arc;

    let mut etcd = setpoint_store::LocalEtcdCluster::start(3).unwrap_or_else(|e| panic!("{e}"));
    let endpoints = etcd.endpoints().join(",");
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let api_flags = [
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoints,
        "--roles",
        "apiserver",
    ];
    let mut a = Server::start_with(&dir_a, "127.0.0.1:0", &api_flags);
    copy_pki(&dir_a, &dir_b);
    let b = Server::start_with(&dir_b, "127.0.0.1:0", &api_flags);
    let (url_a, url_b) = (a.url(), b.url());
    let a_first = format!("{url_a},{url_b}");
    let b_first = format!("{url_b},{url_a}");

    let c1 = start_role_process("controllers,scheduler", &a.kubeconfig(), &a_first, &[]);
    let c1_pid = c1.0.id();
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        let identity = eventually_blocking(&format!("C1 to hold {lease}"), || holder(&b, lease));
        assert!(is_process(&identity, c1_pid), "{lease} held by {identity}");
    }
    let c2 = start_role_process("controllers,scheduler", &b.kubeconfig(), &b_first, &[]);
    let c2_pid = c2.0.id();
    let _agent = start_role_process(
        "agent",
        &b.kubeconfig(),
        &b_first,
        &["--simulated-nodes", "2"],
    );
    b.ok(&[
        "create",
        "deployment",
        "web",
        "--image=example.invalid/web:1",
        "--replicas=3",
    ]);
    converged(&b, 3);
    b.ok(&["create", "namespace", "load"]);

    // The load: a writer and a watcher on each API server, each failing over to the other.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let kubeconfig = a.kubeconfig();
    let client = |servers: &str| {
        let servers: Vec<http::Uri> = servers.split(',').map(|s| s.parse().unwrap()).collect();
        runtime
            .block_on(setpoint_runtime::Client::from_kubeconfig_with_servers(
                &kubeconfig,
                &servers,
            ))
            .unwrap()
    };
    let (client_a, client_b) = (client(&a_first), client(&b_first));
    // The list's own resourceVersion (kubectl prints nothing for `-o jsonpath` on an empty
    // list, and a watch from "" would start with the current objects in name order).
    let list: serde_json::Value =
        serde_json::from_str(&b.ok(&["get", "--raw", "/api/v1/namespaces/load/configmaps"]))
            .unwrap();
    let start_rv = list["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
        .unwrap_or_else(|| panic!("a list resourceVersion in {list}"))
        .to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    // Acknowledged writes of the writer that prefers A, and of both.
    let (count_a, count) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let target = Arc::new(AtomicU64::new(0));
    let watchers = [client_a.clone(), client_b.clone()]
        .map(|c| runtime.spawn(watch_load(c, start_rv.trim().to_owned(), target.clone())));
    let writers = [(client_a, "a", &count_a), (client_b, "b", &count)].map(|(c, prefix, n)| {
        let counts = [n.clone(), count.clone()];
        runtime.spawn(write_load(c, prefix, stop.clone(), counts))
    });
    let more_writes = |n: usize| {
        let goal = count.load(Ordering::Relaxed) + n;
        eventually_blocking(&format!("{n} more acknowledged writes"), || {
            (count.load(Ordering::Relaxed) >= goal).then_some(())
        });
    };

    more_writes(20);
    // The etcd member that leads: the cluster must elect another while the load goes on.
    let leader = eventually_blocking("an etcd leader", || etcd.leader());
    etcd.kill(leader);
    let next = eventually_blocking("a new etcd leader", || etcd.leader());
    assert_ne!(next, leader, "a killed member cannot lead");
    more_writes(20);
    a.kill();
    // The writer that preferred A goes on through B.
    let goal = count_a.load(Ordering::Relaxed) + 5;
    eventually_blocking("writes through the failover client after A died", || {
        (count_a.load(Ordering::Relaxed) >= goal).then_some(())
    });
    more_writes(20);
    drop(c1);
    for lease in ["setpoint-controller-manager", "setpoint-scheduler"] {
        eventually_blocking(&format!("C2 to take {lease} over"), || {
            holder(&b, lease).filter(|h| is_process(h, c2_pid))
        });
    }
    b.ok(&["scale", "deployment", "web", "--replicas=4"]);
    converged(&b, 4);
    more_writes(20);

    // Stop the load; the watchers catch up with the last write.
    stop.store(true, Ordering::Relaxed);
    let written: Vec<Written> = writers
        .into_iter()
        .map(|w| runtime.block_on(w).unwrap())
        .collect();
    let listed: serde_json::Value =
        serde_json::from_str(&b.ok(&["get", "cm", "-n", "load", "-o", "json"])).unwrap();
    let stored: std::collections::BTreeMap<String, u64> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            )
        })
        .collect();
    let last = stored.values().copied().max().unwrap();
    target.store(last, Ordering::Relaxed);
    let watched: Vec<Watched> = watchers
        .into_iter()
        .map(|w| {
            runtime
                .block_on(async { tokio::time::timeout(DEADLINE, w).await })
                .expect("a watcher caught up")
                .unwrap()
        })
        .collect();

    // No acknowledged write lost, each with the resourceVersion it was acknowledged with.
    let mut acked = 0;
    for w in &written {
        for (name, rv) in &w.acked {
            assert_eq!(stored.get(name), Some(rv), "acknowledged {name} at {rv}");
            acked += 1;
        }
    }
    let uncertain: usize = written.iter().map(|w| w.uncertain.len()).sum();
    assert!(stored.len() >= acked && stored.len() <= acked + uncertain);
    // Each watcher saw exactly the stored objects, once each, in increasing order, no 410.
    for (i, w) in watched.iter().enumerate() {
        assert_eq!(w.expired, 0, "watcher {i} got 410 Gone");
        assert!(
            w.events.iter().all(|e| e.0 == "ADDED"),
            "watcher {i}: {:?}",
            w.events
        );
        if let Some(at) = w.events.windows(2).position(|p| p[0].2 >= p[1].2) {
            let around = &w.events[at.saturating_sub(3)..(at + 5).min(w.events.len())];
            panic!(
                "watcher {i} saw resourceVersions out of order at event {at} of {} ({} re-watches): {around:?}; watches: {:?}",
                w.events.len(),
                w.rewatches,
                w.log
            );
        }
        let seen: std::collections::BTreeMap<String, u64> =
            w.events.iter().map(|e| (e.1.clone(), e.2)).collect();
        assert_eq!(seen.len(), w.events.len(), "watcher {i} saw a duplicate");
        assert_eq!(seen, stored, "watcher {i} missed or invented events");
    }
    eprintln!(
        "ha: {acked} acknowledged writes, {uncertain} uncertain; watcher re-watches {:?}",
        watched.iter().map(|w| w.rewatches).collect::<Vec<_>>()
    );
}

#[test]
fn roles_without_the_apiserver_should_ask_for_a_kubeconfig_and_unknown_roles_be_refused() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_setpoint"))
            .arg("server")
            .args(args)
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "setpoint server {args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&["--roles", "controllers,scheduler"]);
    assert!(err.contains("--kubeconfig"), "{err}");
    let err = run(&["--roles", "apiserver,kubelet", "--data-dir", "/nonexistent"]);
    assert!(err.contains("unknown role \"kubelet\""), "{err}");
    let err = run(&["--roles", "apiserver"]);
    assert!(err.contains("--data-dir"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let err = run(&[
        "--roles",
        "controllers",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--data-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}
