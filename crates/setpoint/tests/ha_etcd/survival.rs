//! The cluster under failures: an etcd member, an API server and the leader dying while
//! clients write and watch; no acknowledged write is lost and watches see every change.

use super::*;

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

/// The failure test: a three-member etcd cluster, two API servers, two processes
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
    // Every member must be up and its own (a member lost before the kill would leave no
    // quorum); the failure message shows each member's state and log.
    eventually_blocking("three live etcd members", || etcd.formed().then_some(()));
    let leader = eventually_blocking("an etcd leader", || etcd.leader());
    etcd.kill(leader);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let next = loop {
        if let Some(next) = etcd.leader() {
            break next;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no new etcd leader within 60s of killing m{leader}:\n{}",
            etcd.describe()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
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
    // The root CA publisher's ConfigMap is not the writers'.
    let not_the_load = |name: &str| name == "kube-root-ca.crt";
    let stored: std::collections::BTreeMap<String, u64> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| !o["metadata"]["name"].as_str().is_some_and(not_the_load))
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
        let events: Vec<_> = w.events.iter().filter(|e| !not_the_load(&e.1)).collect();
        let seen: std::collections::BTreeMap<String, u64> =
            events.iter().map(|e| (e.1.clone(), e.2)).collect();
        assert_eq!(seen.len(), events.len(), "watcher {i} saw a duplicate");
        assert_eq!(seen, stored, "watcher {i} missed or invented events");
    }
    eprintln!(
        "ha: {acked} acknowledged writes, {uncertain} uncertain; watcher re-watches {:?}",
        watched.iter().map(|w| w.rewatches).collect::<Vec<_>>()
    );
}
