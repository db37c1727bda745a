//! The scheduler against a real in-process API server (nothing else runs in it: nodes are
//! Node objects the tests create, Ready and with allocatable set through `nodes/status`):
//! binding to a fitting node; each filter (readiness, cordon, taints and tolerations, node
//! selector, node affinity, requests) keeping a node out; least-allocated spreading; a pod no
//! node can take getting `PodScheduled=False` and a `FailedScheduling` Event, then a node when
//! one is added; a burst of 200 pods onto room for exactly 200.
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

use crate::common;

use std::collections::BTreeMap;

use common::run_loops;
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use setpoint_runtime::Client;
use setpoint_testenv::eventually;
use setpoint_testenv::TestEnv;

const NS: &str = "default";

/// A node's shape: its spec and metadata (the status is written separately).
struct NodeSpecOf {
    name: String,
    cpu: &'static str,
    pods: u32,
    labels: &'static [(&'static str, &'static str)],
    /// Merged into `spec` (taints, unschedulable).
    spec: Value,
    ready: bool,
}

impl NodeSpecOf {
    fn new(name: &str) -> NodeSpecOf {
        NodeSpecOf {
            name: name.to_owned(),
            cpu: "4",
            pods: 110,
            labels: &[],
            spec: json!({}),
            ready: true,
        }
    }
}

/// Creates a node and sets its status (Ready or not, allocatable) through `nodes/status`.
async fn add_node(client: &Client, n: NodeSpecOf) {
    let api = client.api::<Node>();
    let node: Node = serde_json::from_value(json!({
        "metadata": {
            "name": n.name,
            "labels": n.labels.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "spec": n.spec,
    }))
    .expect("node");
    api.create(&PostParams::default(), &node)
        .await
        .expect("create node");
    api.patch_status(
        &n.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "capacity": {"cpu": n.cpu, "memory": "8Gi", "pods": n.pods.to_string()},
            "allocatable": {"cpu": n.cpu, "memory": "8Gi", "pods": n.pods.to_string()},
            "conditions": [{
                "type": "Ready",
                "status": if n.ready { "True" } else { "False" },
                "reason": "KubeletReady",
            }],
        }})),
    )
    .await
    .expect("node status");
}

/// A pod `name` with one container requesting `cpu` (none if empty), with `spec` merged in.
fn pod(name: &str, cpu: &str, spec: Value) -> Pod {
    let mut p = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                resources: (!cpu.is_empty()).then(|| ResourceRequirements {
                    requests: Some([("cpu".to_owned(), Quantity(cpu.to_owned()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let mut value = serde_json::to_value(&p).expect("pod json");
    if let (Some(target), Some(extra)) = (value["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    p = serde_json::from_value(value).expect("pod");
    p
}

async fn create_pods(api: &Api<Pod>, prefix: &str, n: usize, cpu: &str, spec: Value) {
    for i in 0..n {
        api.create(
            &PostParams::default(),
            &pod(&format!("{prefix}-{i}"), cpu, spec.clone()),
        )
        .await
        .expect("create pod");
    }
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

/// Waits until every pod whose name starts with `prefix` (there are `n`) is bound; returns how
/// many went to each node.
async fn wait_bound(api: &Api<Pod>, prefix: &str, n: usize) -> BTreeMap<String, usize> {
    eventually(&format!("{n} pods {prefix}-* bound"), || async {
        let pods: Vec<Pod> = api
            .list(&ListParams::default())
            .await
            .expect("list pods")
            .items
            .into_iter()
            .filter(|p| p.name_any().starts_with(&format!("{prefix}-")))
            .collect();
        let mut by_node = BTreeMap::new();
        for p in &pods {
            *by_node.entry(node_of(p)?).or_insert(0) += 1;
        }
        (pods.len() == n).then_some(by_node)
    })
    .await
}

fn condition(p: &Pod, type_: &str) -> Option<(String, Option<String>, Option<String>)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_should_bind_a_pod_to_a_fitting_node() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    add_node(&client, NodeSpecOf::new("n1")).await;
    let running = run_loops(&client, "scheduler");
    let pods = client.namespaced_api::<Pod>(NS);
    create_pods(&pods, "web", 1, "500m", json!({})).await;
    let placed = wait_bound(&pods, "web", 1).await;
    assert_eq!(placed, [("n1".to_owned(), 1)].into());
    let bound = pods.get("web-0").await.expect("pod");
    assert_eq!(
        condition(&bound, "PodScheduled").map(|c| c.0),
        Some("True".to_owned())
    );
    running.stop().await;
}

/// With a node `ok` that fits and a node `bad` that `bad`'s shape keeps out, four pods of
/// `spec` all land on `ok`.
async fn excluded(bad: NodeSpecOf, cpu: &str, spec: Value) {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let mut ok = NodeSpecOf::new("ok");
    ok.labels = &[("disk", "ssd"), ("zone", "a")];
    add_node(&client, ok).await;
    add_node(&client, bad).await;
    let running = run_loops(&client, "scheduler");
    let pods = client.namespaced_api::<Pod>(NS);
    create_pods(&pods, "p", 4, cpu, spec).await;
    let placed = wait_bound(&pods, "p", 4).await;
    assert_eq!(placed, [("ok".to_owned(), 4)].into());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_selector_should_exclude_a_node() {
    let mut bad = NodeSpecOf::new("bad");
    bad.labels = &[("disk", "hdd")];
    excluded(bad, "", json!({"nodeSelector": {"disk": "ssd"}})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_node_affinity_should_exclude_a_node() {
    let mut bad = NodeSpecOf::new("bad");
    bad.labels = &[("zone", "b")];
    let affinity = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}],
    }}}});
    excluded(bad, "", affinity).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untolerated_taint_should_exclude_a_node() {
    let mut bad = NodeSpecOf::new("bad");
    bad.spec = json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]});
    // Tolerating another value of the key is not enough.
    let tolerations = json!({"tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"},
    ]});
    excluded(bad, "", tolerations).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_should_exclude_a_node() {
    let mut bad = NodeSpecOf::new("bad");
    bad.spec = json!({"unschedulable": true});
    excluded(bad, "", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_should_exclude_a_node() {
    let mut bad = NodeSpecOf::new("bad");
    bad.ready = false;
    excluded(bad, "", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_should_exclude_a_node_without_room() {
    let mut bad = NodeSpecOf::new("bad");
    bad.cpu = "500m";
    excluded(bad, "1", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tolerations_should_admit_tainted_and_cordoned_nodes() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let mut tainted = NodeSpecOf::new("tainted");
    tainted.spec = json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]});
    add_node(&client, tainted).await;
    let mut cordoned = NodeSpecOf::new("cordoned");
    cordoned.spec = json!({"unschedulable": true});
    add_node(&client, cordoned).await;
    let running = run_loops(&client, "scheduler");
    let pods = client.namespaced_api::<Pod>(NS);
    let tolerations = json!({"tolerations": [
        {"key": "dedicated", "operator": "Exists"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]});
    create_pods(&pods, "t", 4, "", tolerations).await;
    let placed = wait_bound(&pods, "t", 4).await;
    assert_eq!(
        placed,
        [("cordoned".to_owned(), 2), ("tainted".to_owned(), 2)].into()
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_allocated_should_spread_pods_and_prefer_emptier_nodes() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    for name in ["a", "b", "c"] {
        add_node(&client, NodeSpecOf::new(name)).await;
    }
    let pods = client.namespaced_api::<Pod>(NS);
    // Node a already runs a pod asking for half of it.
    let mut busy = pod("busy", "2", json!({}));
    busy.spec.as_mut().expect("spec").node_name = Some("a".into());
    pods.create(&PostParams::default(), &busy)
        .await
        .expect("create busy pod");
    let running = run_loops(&client, "scheduler");
    create_pods(&pods, "s", 6, "500m", json!({})).await;
    let placed = wait_bound(&pods, "s", 6).await;
    // b and c fill to a's level (2 cpus) before a takes any more.
    assert_eq!(
        placed,
        [("b".to_owned(), 3), ("c".to_owned(), 3)].into(),
        "{placed:?}"
    );
    create_pods(&pods, "u", 3, "500m", json!({})).await;
    let placed = wait_bound(&pods, "u", 3).await;
    assert_eq!(
        placed,
        [
            ("a".to_owned(), 1),
            ("b".to_owned(), 1),
            ("c".to_owned(), 1)
        ]
        .into(),
        "{placed:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_pod_should_be_reported_then_scheduled_when_a_node_is_added() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let mut small = NodeSpecOf::new("small");
    small.cpu = "1";
    small.labels = &[("pool", "main")];
    add_node(&client, small).await;
    for name in ["other-1", "other-2"] {
        let mut other = NodeSpecOf::new(name);
        other.labels = &[("pool", "other")];
        add_node(&client, other).await;
    }
    let running = run_loops(&client, "scheduler");
    let pods = client.namespaced_api::<Pod>(NS);
    create_pods(
        &pods,
        "big",
        1,
        "2",
        json!({"nodeSelector": {"pool": "main"}}),
    )
    .await;

    let expected = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.";
    let reported = eventually("PodScheduled=False", || async {
        let p = pods.get("big-0").await.expect("pod");
        condition(&p, "PodScheduled").filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        reported,
        (
            "False".to_owned(),
            Some("Unschedulable".to_owned()),
            Some(expected.to_owned())
        )
    );
    let events = client.namespaced_api::<Event>(NS);
    let event = eventually("a FailedScheduling Event", || async {
        events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("big-0")
            })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.note.as_deref(), Some(expected));
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("default-scheduler")
    );
    assert!(node_of(&pods.get("big-0").await.expect("pod")).is_none());

    let mut large = NodeSpecOf::new("large");
    large.labels = &[("pool", "main")];
    add_node(&client, large).await;
    let placed = wait_bound(&pods, "big", 1).await;
    assert_eq!(placed, [("large".to_owned(), 1)].into());
    let p = pods.get("big-0").await.expect("pod");
    assert_eq!(
        condition(&p, "PodScheduled").map(|c| c.0),
        Some("True".to_owned())
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_should_make_room_for_an_unschedulable_one() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let mut one = NodeSpecOf::new("one");
    one.pods = 1;
    add_node(&client, one).await;
    let running = run_loops(&client, "scheduler");
    let pods = client.namespaced_api::<Pod>(NS);
    create_pods(&pods, "first", 1, "", json!({})).await;
    wait_bound(&pods, "first", 1).await;
    create_pods(&pods, "second", 1, "", json!({})).await;
    eventually("second is unschedulable", || async {
        let p = pods.get("second-0").await.expect("pod");
        condition(&p, "PodScheduled")
            .filter(|c| c.2.as_deref() == Some("0/1 nodes are available: 1 Too many pods."))
    })
    .await;
    // A bound pod is deleted gracefully; with no agent running, finish it at once.
    pods.delete(
        "first-0",
        &kube::api::DeleteParams::default().grace_period(0),
    )
    .await
    .expect("delete");
    let placed = wait_bound(&pods, "second", 1).await;
    assert_eq!(placed, [("one".to_owned(), 1)].into());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_of_200_pods_should_fill_room_for_exactly_200_without_overcommit() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    // 10 nodes of 2 cpus: room for 20 pods of 100m each.
    for i in 0..10 {
        let mut n = NodeSpecOf::new(&format!("n{i}"));
        n.cpu = "2";
        add_node(&client, n).await;
    }
    let running = run_loops(&client, "scheduler");
    let pods = client.namespaced_api::<Pod>(NS);
    let creates = (0..200).map(|i| {
        let pods = pods.clone();
        async move {
            pods.create(
                &PostParams::default(),
                &pod(&format!("b-{i}"), "100m", json!({})),
            )
            .await
            .expect("create pod");
        }
    });
    futures::future::join_all(creates).await;
    let placed = wait_bound(&pods, "b", 200).await;
    assert_eq!(placed.len(), 10, "{placed:?}");
    assert!(placed.values().all(|n| *n == 20), "{placed:?}");

    create_pods(&pods, "extra", 1, "100m", json!({})).await;
    let reported = eventually("the 201st pod is unschedulable", || async {
        let p = pods.get("extra-0").await.expect("pod");
        condition(&p, "PodScheduled").filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        reported.2.as_deref(),
        Some("0/10 nodes are available: 10 Insufficient cpu.")
    );
    running.stop().await;
}
