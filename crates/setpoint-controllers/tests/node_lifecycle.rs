//! The node lifecycle loop against a real in-process API server (nothing else runs in it: the
//! tests play the node agent, renewing a Lease and posting status themselves): a node that
//! stops renewing is marked `Unknown` and tainted unreachable, its pods are marked not ready
//! and evicted as their tolerations say, and the taints go when it reports `Ready` again; a
//! node reporting `Ready=False` is tainted not-ready; pods bound to nodes that do not exist
//! are removed.
//!
//! Real time (the server is real): tests poll with generous deadlines and never assert on how
//! long something took.

use crate::common;

use std::time::Duration;

use common::run_loops_with;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use setpoint_controllers::{LoopContext, LoopError, LoopSettings};
use setpoint_runtime::Client;
use setpoint_testenv::TestEnv;
use setpoint_testenv::{eventually, Running};
use tokio_util::sync::CancellationToken;

const GRACE: Duration = Duration::from_secs(3);
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// Runs only the node lifecycle loop, with a short grace period, until stopped.
fn start_loop(client: &Client) -> Running<LoopError> {
    let ctx = LoopContext::new(client.clone()).with_settings(LoopSettings {
        node_monitor_grace_period: GRACE,
        ..LoopSettings::default()
    });
    run_loops_with(ctx, "node-lifecycle")
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Posts the node's status as an agent would: `Ready` with a fresh heartbeat.
async fn post_status(client: &Client, node: &str, ready: &str) {
    let now = now_rfc3339();
    let reason = if ready == "True" {
        "KubeletReady"
    } else {
        "KubeletNotReady"
    };
    let patch = json!({"status": {"conditions": [
        {"type": "Ready", "status": ready, "reason": reason, "lastHeartbeatTime": now, "lastTransitionTime": now},
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "lastHeartbeatTime": now, "lastTransitionTime": now},
    ]}});
    client
        .api::<Node>()
        .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("post node status");
}

/// Creates or renews the node's Lease.
async fn renew_lease(client: &Client, node: &str) {
    let api: Api<Lease> = client.namespaced_api("kube-node-lease");
    let micros = chrono::Utc::now().timestamp_micros();
    let renew = MicroTime(k8s_openapi::jiff::Timestamp::from_microsecond(micros).expect("now"));
    match api.get_opt(node).await.expect("read lease") {
        Some(mut lease) => {
            lease.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(renew);
            // A conflict with nobody is impossible here; any error fails the test.
            api.replace(node, &PostParams::default(), &lease)
                .await
                .expect("renew lease");
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(node.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(node.to_owned()),
                    lease_duration_seconds: Some(40),
                    renew_time: Some(renew),
                    ..LeaseSpec::default()
                }),
            };
            api.create(&PostParams::default(), &lease)
                .await
                .expect("create lease");
        }
    }
}

/// Renews the node's Lease every 200 ms until the token is cancelled.
fn keep_renewing(client: &Client, node: &str) -> CancellationToken {
    let stop = CancellationToken::new();
    let (client, node, token) = (client.clone(), node.to_owned(), stop.clone());
    tokio::spawn(async move {
        while !token.is_cancelled() {
            renew_lease(&client, &node).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    stop
}

async fn create_node(client: &Client, name: &str) {
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    client
        .api::<Node>()
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
}

/// Creates a pod bound to `node` with these tolerations, and marks it running and ready.
async fn create_pod(client: &Client, name: &str, node: &str, tolerations: Vec<Toleration>) {
    let pods: Api<Pod> = client.namespaced_api("default");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            containers: vec![Container {
                name: "c".to_owned(),
                image: Some("busybox".to_owned()),
                ..Container::default()
            }],
            tolerations: Some(tolerations),
            ..PodSpec::default()
        }),
        status: None,
    };
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let patch = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()}
    ]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("mark pod ready");
}

fn tolerate_unreachable(seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(UNREACHABLE.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some("NoExecute".to_owned()),
        toleration_seconds: seconds,
        value: None,
    }
}

async fn node(client: &Client, name: &str) -> Node {
    client.api::<Node>().get(name).await.expect("read node")
}

fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

fn has_taint(node: &Node, key: &str, effect: &str) -> bool {
    taints(node)
        .iter()
        .any(|t| t.key == key && t.effect == effect)
}

/// Whether the pod is being deleted (or gone).
async fn deleting(client: &Client, name: &str) -> bool {
    let pods: Api<Pod> = client.namespaced_api("default");
    match pods.get_opt(name).await.expect("read pod") {
        None => true,
        Some(p) => p.metadata.deletion_timestamp.is_some(),
    }
}

async fn pod_ready(client: &Client, name: &str) -> Option<String> {
    let pods: Api<Pod> = client.namespaced_api("default");
    let pod = pods.get(name).await.expect("read pod");
    pod.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_node_should_be_marked_unknown_tainted_and_its_pods_evicted() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    create_node(&client, "n1").await;
    post_status(&client, "n1", "True").await;
    let renewing = keep_renewing(&client, "n1");
    create_pod(&client, "short", "n1", vec![tolerate_unreachable(Some(2))]).await;
    create_pod(&client, "default", "n1", vec![]).await;
    create_pod(&client, "forever", "n1", vec![tolerate_unreachable(None)]).await;
    let running = start_loop(&client);

    // The node is alive: after a few grace periods it is still Ready, untainted.
    tokio::time::sleep(GRACE * 2).await;
    let n = node(&client, "n1").await;
    assert_eq!(ready_status(&n).as_deref(), Some("True"), "{n:?}");
    assert!(taints(&n).is_empty(), "{n:?}");

    // The node falls silent.
    renewing.cancel();
    let n = eventually("Ready=Unknown and the unreachable taints", || async {
        let n = node(&client, "n1").await;
        (ready_status(&n).as_deref() == Some("Unknown")
            && has_taint(&n, UNREACHABLE, "NoSchedule")
            && has_taint(&n, UNREACHABLE, "NoExecute"))
        .then_some(n)
    })
    .await;
    let conditions = n.status.and_then(|s| s.conditions).expect("conditions");
    let ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        ready.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    let no_execute = taints(&node(&client, "n1").await)
        .into_iter()
        .find(|t| t.effect == "NoExecute")
        .expect("NoExecute taint");
    assert!(no_execute.time_added.is_some(), "{no_execute:?}");

    // Pods are marked not ready; the one tolerating 2 s is evicted.
    eventually("pods marked not ready", || async {
        (pod_ready(&client, "default").await.as_deref() == Some("False")).then_some(())
    })
    .await;
    eventually("the pod tolerating 2 s evicted", || async {
        deleting(&client, "short").await.then_some(())
    })
    .await;
    // Those tolerating 300 s (the default) or forever stay.
    assert!(!deleting(&client, "default").await);
    assert!(!deleting(&client, "forever").await);

    // The node comes back: taints go.
    let renewing = keep_renewing(&client, "n1");
    post_status(&client, "n1", "True").await;
    eventually("taints removed once Ready again", || async {
        let n = node(&client, "n1").await;
        (ready_status(&n).as_deref() == Some("True") && taints(&n).is_empty()).then_some(())
    })
    .await;

    // A NoExecute taint nobody tolerates evicts the rest at once.
    let patch =
        json!({"spec": {"taints": [{"key": "example.com/maintenance", "effect": "NoExecute"}]}});
    client
        .api::<Node>()
        .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("taint node");
    eventually("untolerating pods evicted", || async {
        (deleting(&client, "default").await && deleting(&client, "forever").await).then_some(())
    })
    .await;
    // The loop leaves taints it does not manage alone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let n = node(&client, "n1").await;
    assert!(
        has_taint(&n, "example.com/maintenance", "NoExecute"),
        "{n:?}"
    );

    renewing.cancel();
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reporting_not_ready_should_get_not_ready_taints() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    create_node(&client, "n2").await;
    post_status(&client, "n2", "False").await;
    let renewing = keep_renewing(&client, "n2");
    let running = start_loop(&client);
    let n = eventually("not-ready taints", || async {
        let n = node(&client, "n2").await;
        (has_taint(&n, NOT_READY, "NoSchedule") && has_taint(&n, NOT_READY, "NoExecute"))
            .then_some(n)
    })
    .await;
    // Its Lease is renewed: the node is not-ready, not unreachable.
    assert_eq!(ready_status(&n).as_deref(), Some("False"));
    assert!(!has_taint(&n, UNREACHABLE, "NoExecute"), "{n:?}");
    post_status(&client, "n2", "True").await;
    eventually("taints removed", || async {
        taints(&node(&client, "n2").await).is_empty().then_some(())
    })
    .await;
    renewing.cancel();
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_bound_to_missing_nodes_should_be_removed() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let pods: Api<Pod> = client.namespaced_api("default");
    create_node(&client, "n3").await;
    post_status(&client, "n3", "True").await;
    create_pod(&client, "on-ghost", "ghost", vec![]).await;
    create_pod(&client, "on-n3", "n3", vec![]).await;
    let running = start_loop(&client);
    eventually("the pod on a node that never existed removed", || async {
        pods.get_opt("on-ghost")
            .await
            .expect("read")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(pods.get_opt("on-n3").await.expect("read").is_some());
    client
        .api::<Node>()
        .delete("n3", &DeleteParams::default())
        .await
        .expect("delete node");
    eventually("the pod of a deleted node removed", || async {
        pods.get_opt("on-n3")
            .await
            .expect("read")
            .is_none()
            .then_some(())
    })
    .await;
    running.stop().await;
}
