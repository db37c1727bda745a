//! Pod networking through the whole agent: in bridge mode (root only) a pod gets its own
//! network namespace with an address from the Node's podCIDR, reachable from the host, its
//! `/etc/hosts`, `/etc/hostname` and `/etc/resolv.conf`, and traffic routed from it is fenced
//! off the uplinks; deleting the pod removes its namespace, veth and address. In host-network
//! mode (forced) pods get the node's address and the Node says so in a condition.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use setpoint_agent::{ContainerTracking, MountMode, PodNetworkMode};
use setpoint_testenv::eventually;

use super::{files_named, Harness, NODE};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

async fn start(mode: PodNetworkMode) -> Harness {
    let env = setpoint_testenv::TestEnv::start()
        .await
        .expect("test API server");
    let client = env.client();
    let mut harness = Harness {
        _env: env,
        client,
        root: tempfile::tempdir().expect("a root directory"),
        agent: None,
        tracking: ContainerTracking::Auto,
        mount_mode: MountMode::Auto,
        pod_network: mode,
    };
    harness.start_agent();
    harness
}

/// The Node's condition `PodNetworkIsolated`: status and reason.
async fn isolation(h: &Harness) -> Option<(String, String)> {
    let node = h.client.api::<Node>().get_opt(NODE).await.ok()??;
    node.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodNetworkIsolated")
        .map(|c| (c.status, c.reason.unwrap_or_default()))
}

fn pod_ip(pod: &k8s_openapi::api::core::v1::Pod) -> Option<String> {
    pod.status.as_ref()?.pod_ip.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_mode_should_give_pods_their_own_addresses_files_and_teardown() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let h = start(PodNetworkMode::Bridge).await;
    // No node-ipam loop here: give the node its range as the loop would.
    let nodes = h.client.api::<Node>();
    eventually("the node registered", || async {
        nodes.get_opt(NODE).await.ok().flatten().is_some()
    })
    .await;
    nodes
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"podCIDR": "10.251.7.0/24", "podCIDRs": ["10.251.7.0/24"]}}),
            ),
        )
        .await
        .expect("pod range");
    let script =
        "cat /etc/hosts > hosts.out; cat /etc/resolv.conf > resolv.out; hostname > hostname.out; \
                  exec python3 -m http.server 8080 --bind 0.0.0.0";
    for name in ["web-a", "web-b"] {
        h.create_pod(
            name,
            json!({"hostname": name, "subdomain": "peers",
                   "containers": [{"name": "app", "command": ["sh", "-c", script],
                   "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}]}),
        )
        .await;
    }
    let mut ips = Vec::new();
    for name in ["web-a", "web-b"] {
        let pod = h
            .wait_pod(name, "ready with an IP", |p| {
                pod_ip(p).is_some()
                    && p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        })
            })
            .await;
        let ip: Ipv4Addr = pod_ip(&pod).expect("ip").parse().expect("an IPv4 address");
        assert_eq!(ip.octets()[..3], [10, 251, 7], "inside the podCIDR: {ip}");
        assert_ne!(ip, Ipv4Addr::new(10, 251, 7, 1), "not the gateway");
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.host_ip.as_deref()),
            Some("127.0.0.1")
        );
        // Reachable from the host at its own address, on the port both pods use.
        let reply = reqwest_get(ip, 8080).await;
        assert!(
            reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"),
            "{reply}"
        );
        ips.push(ip);
    }
    assert_ne!(ips[0], ips[1]);
    assert_eq!(
        isolation(&h).await,
        Some(("True".to_owned(), "BridgeNetwork".to_owned()))
    );

    let read = |suffix: &str, pod: &str| {
        files_named(h.root.path(), suffix)
            .into_iter()
            .find(|p| p.to_string_lossy().contains(&format!("_{pod}_")))
            .and_then(|p| std::fs::read_to_string(p).ok())
    };
    let hosts = read("hosts.out", "web-a").expect("hosts written");
    assert!(
        hosts.contains(&format!(
            "{}\tweb-a.peers.default.svc.cluster.local\tweb-a",
            ips[0]
        )),
        "{hosts}"
    );
    let resolv = read("resolv.out", "web-a").expect("resolv.conf written");
    assert!(resolv.contains("nameserver 10.251.7.1\n"), "{resolv}");
    assert!(
        resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{resolv}"
    );
    assert!(resolv.contains("options ndots:5"), "{resolv}");
    assert_eq!(read("hostname.out", "web-b").as_deref(), Some("web-b\n"));

    // The fence: a packet from a pod to an address beyond the uplink is unroutable.
    let bridge = std::fs::read_dir("/sys/class/net")
        .expect("links")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| {
            n.starts_with("spbr")
                && std::fs::read_to_string(format!("/sys/class/net/{n}/ifalias"))
                    .is_ok_and(|a| a.trim() == format!("setpoint:{}", h.root.path().display()))
        })
        .expect("the agent's bridge");
    let route = std::process::Command::new("ip")
        .args([
            "-4",
            "route",
            "get",
            "198.51.100.1",
            "from",
            &ips[0].to_string(),
            "iif",
            &bridge,
        ])
        .output()
        .expect("ip route get");
    let answer = format!(
        "{}{}",
        String::from_utf8_lossy(&route.stdout),
        String::from_utf8_lossy(&route.stderr)
    );
    assert!(
        answer.contains("nreachable"),
        "pod traffic must not leave by the uplink: {answer}"
    );

    // A finished pod gives its network back and keeps its address in the status.
    h.create_pod(
        "done",
        json!({"restartPolicy": "Never",
               "containers": [{"name": "app", "command": ["sh", "-c", "hostname -I > ip.out"]}]}),
    )
    .await;
    let done = h
        .wait_pod("done", "Succeeded", |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
        })
        .await;
    let done_ip = pod_ip(&done).expect("a finished pod keeps its podIP");
    assert_eq!(
        read("ip.out", "done").map(|s| s.trim().to_owned()),
        Some(done_ip.clone())
    );
    let netns_dir = h.root.path().join("network").join("netns");
    eventually("the finished pod's network released", || async {
        std::fs::read_dir(&netns_dir)
            .map(|d| d.count())
            .unwrap_or(0)
            == 2
            && files_named(&h.root.path().join("network").join("ipam"), &done_ip).is_empty()
    })
    .await;

    // Deleting a pod removes its namespace, its veth and its address.
    h.delete_pod("web-a").await;
    h.wait_gone("web-a").await;
    eventually("web-a's network removed", || async {
        std::fs::read_dir(&netns_dir)
            .map(|d| d.count())
            .unwrap_or(0)
            == 1
            && files_named(
                &h.root.path().join("network").join("ipam"),
                &ips[0].to_string(),
            )
            .is_empty()
    })
    .await;
}

/// A plain HTTP/1.0 GET; the whole reply.
async fn reqwest_get(ip: Ipv4Addr, port: u16) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut conn) = tokio::net::TcpStream::connect((ip, port)).await {
            let _ = conn.write_all(b"GET / HTTP/1.0\r\n\r\n").await;
            let mut reply = Vec::new();
            let _ = conn.read_to_end(&mut reply).await;
            return String::from_utf8_lossy(&reply).into_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{ip}:{port} unreachable"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_mode_should_use_the_node_address_and_say_so_on_the_node() {
    let h = start(PodNetworkMode::Host).await;
    h.create_pod(
        "plain",
        json!({"containers": [{"name": "app", "command": ["sleep", "3600"]}]}),
    )
    .await;
    let pod = h.wait_pod("plain", "an IP", |p| pod_ip(p).is_some()).await;
    assert_eq!(pod_ip(&pod).as_deref(), Some("127.0.0.1"));
    assert_eq!(
        eventually("the isolation condition", || isolation(&h)).await,
        ("False".to_owned(), "HostNetwork".to_owned())
    );
}
