//! Simulated nodes against a real in-process API server (no scheduler runs: the tests bind
//! pods by setting `spec.nodeName`): the nodes register `Ready` with their label, addresses
//! and capacity, keep their Leases renewed, start the pods bound to them (`Running`, ready,
//! with a pod IP from the node's range) after the start-up delay, and remove pods being
//! deleted.
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took
//! (the throughput test prints its figure).

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use setpoint_agent::{run_simulated, AgentError, SimulatedNodes, SIMULATED_LABEL};
use setpoint_runtime::Client;
use setpoint_testenv::{eventually, Running};

/// Runs `nodes` on `client` until stopped.
fn start(client: &Client, nodes: SimulatedNodes) -> Running<AgentError> {
    let client = client.clone();
    Running::spawn(move |shutdown| run_simulated(client, nodes, shutdown))
}

use setpoint_testenv::TestEnv;

fn pod(name: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some("nginx:1.27".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_nodes_should_register_renew_leases_and_run_pods() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let simulated = start(&client, SimulatedNodes::new(3).max_pods(200));
    let nodes: Api<Node> = client.api();
    let leases: Api<Lease> = client.namespaced_api("kube-node-lease");
    let pods: Api<Pod> = client.namespaced_api("default");

    let listed = eventually("3 Ready simulated nodes", || async {
        let params = ListParams::default().labels(&format!("{SIMULATED_LABEL}=true"));
        let list = nodes.list(&params).await.expect("list nodes");
        (list.items.len() == 3 && list.items.iter().all(ready)).then_some(list.items)
    })
    .await;
    let sim1 = listed
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("sim-1"))
        .expect("sim-1");
    let status = sim1.status.clone().expect("status");
    assert_eq!(
        status
            .capacity
            .as_ref()
            .and_then(|c| c.get("pods"))
            .map(|q| q.0.as_str()),
        Some("200")
    );
    let internal_ip = status
        .addresses
        .unwrap_or_default()
        .into_iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address);
    assert_eq!(internal_ip.as_deref(), Some("172.16.0.2"));

    // A pod bound to sim-1 runs there.
    pods.create(&PostParams::default(), &pod("web", "sim-1"))
        .await
        .expect("create pod");
    let running = eventually("the pod Running", || async {
        let p = pods.get("web").await.expect("read pod");
        (phase(&p) == Some("Running")).then_some(p)
    })
    .await;
    let status = running.status.expect("status");
    assert_eq!(status.host_ip.as_deref(), Some("172.16.0.2"));
    let pod_ip = status.pod_ip.expect("pod ip");
    assert!(pod_ip.starts_with("10.244.1."), "{pod_ip}");
    let container = &status.container_statuses.expect("container statuses")[0];
    assert!(container.ready);
    assert_eq!(container.image_id, "sim://nginx:1.27");
    assert!(status
        .conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True"));

    // A pod bound to some other node is left alone.
    pods.create(&PostParams::default(), &pod("elsewhere", "real-node"))
        .await
        .expect("create pod");

    // Deleting a pod of a simulated node removes it (the node finishes the graceful delete).
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("delete pod");
    eventually("the pod removed", || async {
        pods.get_opt("web")
            .await
            .expect("read pod")
            .is_none()
            .then_some(())
    })
    .await;
    let other = pods.get("elsewhere").await.expect("read pod");
    assert_eq!(phase(&other), Some("Pending"));

    // Leases exist and are renewed (every 10 s).
    let first = eventually("sim-0's lease", || async {
        leases
            .get_opt("sim-0")
            .await
            .expect("read lease")
            .and_then(|l| l.spec?.renew_time)
    })
    .await;
    eventually("sim-0's lease renewed", || async {
        let renewed = leases
            .get("sim-0")
            .await
            .expect("read lease")
            .spec
            .and_then(|s| s.renew_time)?;
        (renewed != first).then_some(())
    })
    .await;
    for name in ["sim-1", "sim-2"] {
        assert!(leases.get_opt(name).await.expect("read lease").is_some());
    }

    simulated.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_should_wait_out_the_start_delay() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let pods: Api<Pod> = client.namespaced_api("default");
    let simulated = start(
        &client,
        SimulatedNodes::named("edge").start_delay(Duration::from_secs(2)),
    );
    eventually("the node registered", || async {
        client
            .api::<Node>()
            .get_opt("edge")
            .await
            .expect("read node")
            .filter(ready)
    })
    .await;
    pods.create(&PostParams::default(), &pod("slow", "edge"))
        .await
        .expect("create pod");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let early = pods.get("slow").await.expect("read pod");
    assert_eq!(phase(&early), Some("Pending"), "started before its delay");
    eventually("the pod Running after its delay", || async {
        let p = pods.get("slow").await.expect("read pod");
        (phase(&p) == Some("Running")).then_some(())
    })
    .await;
    simulated.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_nodes_should_start_many_pods() {
    const PODS: usize = 2_000;
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let pods: Api<Pod> = client.namespaced_api("default");
    let simulated = start(&client, SimulatedNodes::new(10).max_pods(300));
    eventually("10 nodes", || async {
        let list = client
            .api::<Node>()
            .list(&ListParams::default())
            .await
            .expect("list nodes");
        (list.items.iter().filter(|n| ready(n)).count() == 10).then_some(())
    })
    .await;
    let started = Instant::now();
    let creates = futures::stream::iter(0..PODS).map(|i| {
        let pods = pods.clone();
        async move {
            pods.create(
                &PostParams::default(),
                &pod(&format!("p{i}"), &format!("sim-{}", i % 10)),
            )
            .await
            .expect("create pod");
        }
    });
    creates.buffer_unordered(32).collect::<Vec<()>>().await;
    let created = started.elapsed();
    eventually("every pod Running", || async {
        let list = pods.list(&ListParams::default()).await.expect("list pods");
        let running = list
            .items
            .iter()
            .filter(|p| phase(p) == Some("Running"))
            .count();
        (running == PODS).then_some(())
    })
    .await;
    let all = started.elapsed();
    println!(
        "{PODS} pods: created in {created:?}, all Running after {all:?} ({:.0} pods/s end to end)",
        PODS as f64 / all.as_secs_f64()
    );
    simulated.stop().await;
}
