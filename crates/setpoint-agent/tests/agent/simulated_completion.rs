//! Simulated nodes running pods to completion: a `restartPolicy: Never` pod ends `Succeeded` or
//! `Failed` with the exit code its annotation sets, an `OnFailure` pod that fails restarts in
//! place, an `Always` pod keeps running, and a deleted pod holding a finalizer is marked
//! `Failed` before it goes.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use setpoint_agent::{SimulatedNodes, SIMULATED_EXIT_CODE, SIMULATED_RUN_TIME};
use setpoint_testenv::{eventually, TestEnv};
use tokio_util::sync::CancellationToken;

use super::{first_container, phase, NS};

fn pod(name: &str, policy: &str, exit_code: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "annotations": {
            SIMULATED_RUN_TIME: "100ms", SIMULATED_EXIT_CODE: exit_code,
        }},
        "spec": {
            "nodeName": "sim-0",
            "restartPolicy": policy,
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }))
    .expect("a pod")
}

async fn wait_phase(api: &Api<Pod>, name: &str, want: &str) -> Pod {
    eventually(&format!("pod {name} {want}"), || async {
        let p = api.get(name).await.expect("get pod");
        (phase(&p) == want).then_some(p)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_pods_should_finish_as_their_restart_policy_and_annotations_say() {
    let env = TestEnv::start().await.expect("test API server");
    let client = env.client();
    let shutdown = CancellationToken::new();
    let nodes = tokio::spawn(setpoint_agent::run_simulated(
        client.clone(),
        SimulatedNodes::new(1),
        shutdown.clone(),
    ));
    let api = client.namespaced_api::<Pod>(NS);
    for p in [
        pod("ok", "Never", "0"),
        pod("bad", "Never", "3"),
        pod("retry", "OnFailure", "1"),
        pod("server", "Always", "0"),
    ] {
        api.create(&PostParams::default(), &p)
            .await
            .expect("create pod");
    }
    wait_phase(&api, "ok", "Succeeded").await;
    let bad = wait_phase(&api, "bad", "Failed").await;
    let terminated = first_container(&bad)
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 3);
    eventually("the OnFailure pod restarted in place", || async {
        let p = api.get("retry").await.expect("get");
        phase(&p) == "Running" && first_container(&p).is_some_and(|c| c.restart_count >= 2)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(phase(&api.get("server").await.expect("get")), "Running");

    // A pod held by a finalizer is marked Failed when deleted.
    let mut held = pod("held", "Always", "0");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held)
        .await
        .expect("create");
    wait_phase(&api, "held", "Running").await;
    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    wait_phase(&api, "held", "Failed").await;
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    shutdown.cancel();
    nodes.await.expect("joined").expect("ran");
}
