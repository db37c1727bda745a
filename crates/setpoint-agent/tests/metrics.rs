//! Resource metrics through the whole agent, against a real in-process API server: a pod
//! with a CPU-burning container and an idle one, measured from `/proc` by the agent's sampler
//! and read over its HTTPS endpoint (`/metrics/resource`) with a client certificate of the
//! cluster CA — the burner shows CPU, both show memory, the node shows both.
//!
//! (`/proc` parsing and the rate arithmetic are unit-tested in `src/metrics/`; `kubectl top`
//! end to end is in `crates/setpoint/tests/top_kubectl.rs`.)

use crate::common;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::{sleep, Instant};

use common::*;

const NODE: &str = "metrics-node";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_container_should_show_cpu_and_every_container_memory() {
    let (ca_pem, client_config) = ca_and_client();
    let h = Harness::start(NODE, ca_pem, Duration::from_secs(1)).await;
    let port = agent_port(&h.client, NODE).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "busy", "namespace": NS},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "burn", "image": "busybox", "command": ["sh", "-c", "while :; do :; done"]},
            {"name": "idle", "image": "busybox", "command": ["sleep", "1000"]},
        ]},
    }))
    .expect("a pod");
    h.pods()
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    h.wait_container("busy", "running", |_, c| running(c)).await;

    // Poll until a report measures both containers with the burner busy; the sampler runs
    // every second here.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (report, burn, idle) = loop {
        let (code, body) = get(port, &client_config, "/metrics/resource").await;
        let report: Option<Value> = (code == 200)
            .then(|| serde_json::from_str(&body).ok())
            .flatten();
        let usage = |r: &Value, name: &str| -> Option<(u64, u64)> {
            let pod = r["pods"].as_array()?.iter().find(|p| p["name"] == "busy")?;
            let c = pod["containers"]
                .as_array()?
                .iter()
                .find(|c| c["name"] == name)?;
            Some((
                c["cpuNanoCores"].as_u64()?,
                c["memoryWorkingSetBytes"].as_u64()?,
            ))
        };
        if let Some(r) = report {
            if let (Some(burn), Some(idle)) = (usage(&r, "burn"), usage(&r, "idle")) {
                if burn.0 > 0 {
                    break (r, burn, idle);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no report with the busy pod: {code} {body}"
        );
        sleep(Duration::from_millis(200)).await;
    };
    assert!(
        burn.0 > idle.0,
        "the burner uses more CPU than the sleeper: {report}"
    );
    assert!(burn.1 > 0 && idle.1 > 0, "both have memory: {report}");
    let pod = report["pods"]
        .as_array()
        .and_then(|pods| pods.iter().find(|p| p["name"] == "busy"))
        .expect("the pod");
    assert_eq!(pod["namespace"], NS);
    assert!(pod["uid"].as_str().is_some_and(|u| !u.is_empty()), "{pod}");
    assert!(pod["windowMillis"].as_u64() > Some(0), "{pod}");
    let node = &report["node"];
    assert_eq!(node["name"], NODE, "{report}");
    assert!(node["cpuNanoCores"].as_u64() > Some(0), "{report}");
    assert!(
        node["memoryWorkingSetBytes"].as_u64() > Some(burn.1),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_container_should_be_in_the_first_report_after_it_runs() {
    // Regression (issue 14.11): a new pod's metrics appeared only at the next sample (4–20 s
    // after Running); the agent now samples a container as soon as it starts. The period here
    // is an hour, so only that sample can bring the pod into a report.
    let (ca_pem, client_config) = ca_and_client();
    let h = Harness::start("fresh-node", ca_pem, Duration::from_secs(3600)).await;
    let port = agent_port(&h.client, "fresh-node").await;
    // A report exists before the pod does.
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(port, &client_config, "/metrics/resource").await.0 != 200 {
        assert!(Instant::now() < deadline, "no first report");
        sleep(Duration::from_millis(100)).await;
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "fresh", "namespace": NS},
        "spec": {"nodeName": "fresh-node", "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "idle", "image": "busybox", "command": ["sleep", "1000"]},
        ]},
    }))
    .expect("a pod");
    h.pods()
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    h.wait_container("fresh", "running", |_, c| running(c))
        .await;
    let (code, body) = get(port, &client_config, "/metrics/resource").await;
    assert_eq!(code, 200, "{body}");
    let report: Value = serde_json::from_str(&body).expect("a report");
    let pod = report["pods"]
        .as_array()
        .and_then(|pods| pods.iter().find(|p| p["name"] == "fresh"));
    let pod = pod.unwrap_or_else(|| panic!("the running pod is in the report: {report}"));
    assert_eq!(pod["containers"][0]["name"], "idle", "{report}");
    assert!(
        pod["containers"][0]["memoryWorkingSetBytes"].as_u64() > Some(0),
        "{report}"
    );
}
