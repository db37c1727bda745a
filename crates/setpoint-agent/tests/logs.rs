//! Container logs through the whole agent, against a real in-process API server: a pod's
//! output, written by the container shim, read over the agent's HTTPS endpoint with a client
//! certificate of the cluster CA — stdout and stderr in the log, a line without its newline
//! kept whole, and `follow` ending by itself once the container has exited.
//!
//! (The log format, tail/since/limit/timestamps/previous and the endpoint's mutual TLS are
//! unit-tested in `src/logs/` and `src/server/`; `kubectl logs` end to end is in
//! `crates/setpoint/tests/logs_kubectl.rs`.)

use crate::common;

use serde_json::json;
use std::time::Duration;
use tokio::time::sleep;

use common::*;

const NODE: &str = "logs-node";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followed_log_should_hold_the_output_and_end_when_the_container_exits() {
    let (ca_pem, client_config) = ca_and_client();
    let h = Harness::start(NODE, ca_pem, setpoint_agent::DEFAULT_METRICS_INTERVAL).await;
    let port = agent_port(&h.client, NODE).await;
    let work = tempfile::tempdir().expect("tempdir");
    let go = work.path().join("go");
    h.create_pod(
        "talk",
        json!({"command": ["sh", "-c", format!(
            "echo out 1; echo err 1 >&2; printf 'no newline '; while [ ! -f {} ]; do sleep 0.1; done; echo out 2",
            go.display()
        )]}),
        Some("Never"),
    )
    .await;
    h.wait_container("talk", "running", |_, c| running(c)).await;
    let uid = h
        .pods()
        .get("talk")
        .await
        .expect("pod")
        .metadata
        .uid
        .expect("a uid");

    // Follow: started while the container still runs, so it can only end once the exit record
    // is written — after the `go` file lets the container finish.
    let follow = {
        let config = client_config.clone();
        let path = format!("/containerLogs/{NS}/talk/app?follow=true&podUID={uid}");
        tokio::spawn(async move { get(port, &config, &path).await })
    };
    sleep(Duration::from_millis(500)).await;
    assert!(
        !follow.is_finished(),
        "the follow ended while the container ran"
    );
    std::fs::write(&go, "").expect("let it finish");
    let (code, body) = tokio::time::timeout(Duration::from_secs(60), follow)
        .await
        .expect("the follow ends after the container exits")
        .expect("the follow task");
    assert_eq!(code, 200, "{body}");
    let stdout: Vec<&str> = body.lines().filter(|l| !l.starts_with("err")).collect();
    assert_eq!(stdout, vec!["out 1", "no newline out 2"], "{body}");
    assert!(
        body.lines().any(|l| l == "err 1"),
        "stderr is in the log: {body}"
    );

    // After the exit: the same log without follow; a container that does not exist is
    // waiting to start.
    let (code, again) = get(
        port,
        &client_config,
        &format!("/containerLogs/{NS}/talk/app?podUID={uid}"),
    )
    .await;
    assert_eq!((code, again.as_str()), (200, body.as_str()));
    let (code, error) = get(
        port,
        &client_config,
        &format!("/containerLogs/{NS}/talk/nope?podUID={uid}"),
    )
    .await;
    assert_eq!(code, 400, "{error}");
    assert!(
        error.contains("waiting to start: ContainerCreating"),
        "{error}"
    );
}
