//! The `node-ipam` loop against an in-process API server: each Node gets its own `/24` of a
//! small cluster CIDR, assignments survive a restart of the loop, a deleted Node's range is
//! reused, and a Node left without a range gets a `CIDRNotAvailable` event.

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use serde_json::json;
use setpoint_controllers::{LoopContext, LoopSettings};
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops_with;

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}})).expect("node")
}

async fn pod_cidr(nodes: &Api<Node>, name: &str) -> Option<String> {
    let spec = nodes.get(name).await.ok()?.spec?;
    let cidr = spec.pod_cidr?;
    (spec.pod_cidrs.as_deref() == Some(std::slice::from_ref(&cidr))).then_some(cidr)
}

fn start(env: &TestEnv) -> setpoint_testenv::Running<setpoint_controllers::LoopError> {
    let ctx = LoopContext {
        settings: LoopSettings {
            cluster_cidr: Some("10.250.0.0/23".parse().expect("cidr")),
            node_cidr_mask_size: 24,
            ..LoopSettings::default()
        },
        ..LoopContext::new(env.client())
    };
    run_loops_with(ctx, "node-ipam")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_should_get_distinct_stable_ranges_reused_after_deletion() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let nodes = client.api::<Node>();
    let running = start(&env);
    for name in ["n1", "n2"] {
        nodes
            .create(&PostParams::default(), &node(name))
            .await
            .expect("node");
    }
    let first = eventually("n1 has a range", || pod_cidr(&nodes, "n1")).await;
    let second = eventually("n2 has a range", || pod_cidr(&nodes, "n2")).await;
    let mut both = vec![first.clone(), second.clone()];
    both.sort();
    assert_eq!(both, vec!["10.250.0.0/24", "10.250.1.0/24"]);

    // The cluster CIDR is full: a third node waits, with an event saying why.
    nodes
        .create(&PostParams::default(), &node("n3"))
        .await
        .expect("node");
    let events = client.api::<Event>();
    eventually("a CIDRNotAvailable event for n3", || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("CIDRNotAvailable")
                    && e.involved_object.name.as_deref() == Some("n3")
            })
    })
    .await;
    assert_eq!(pod_cidr(&nodes, "n3").await, None);

    // A restarted loop keeps the assignments; n1's range goes to n3 once n1 is deleted.
    running.stop().await;
    let running = start(&env);
    nodes
        .delete("n1", &DeleteParams::default())
        .await
        .expect("delete n1");
    let third = eventually("n3 gets the freed range", || pod_cidr(&nodes, "n3")).await;
    assert_eq!(third, first);
    assert_eq!(pod_cidr(&nodes, "n2").await, Some(second));
    running.stop().await;
}
