//! Probes through the whole agent, against a real in-process API server: a readiness probe
//! (`httpGet` on a server in this test) flips the container's and the pod's readiness both
//! ways; a failing liveness probe (`exec`) gets the container restarted; a startup probe holds
//! `started` and readiness back until it passes.
//!
//! Real time and real processes: tests poll with generous deadlines and never assert on how
//! long something took; every test kills whatever its pods left running, even when it fails.

use crate::common;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::time::sleep;

use common::*;

const NODE: &str = "probe-node";

fn pod_ready(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// An HTTP server on 127.0.0.1 answering 200 while `healthy`, else 503.
async fn health_server(healthy: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let healthy = healthy.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf).await;
                let status = if healthy.load(Ordering::SeqCst) {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = conn
                    .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes())
                    .await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_probe_should_flip_the_pod_ready_both_ways() {
    let h = Harness::start(
        NODE,
        test_ca_pem(),
        setpoint_agent::DEFAULT_METRICS_INTERVAL,
    )
    .await;
    let healthy = Arc::new(AtomicBool::new(false));
    let port = health_server(healthy.clone()).await;
    h.create_pod(
        "web",
        json!({
            "command": ["sh", "-c", "exec sleep 1000"],
            "ports": [{"name": "http", "containerPort": port}],
            "readinessProbe": {
                "httpGet": {"port": "http", "path": "/healthz"},
                "periodSeconds": 1, "failureThreshold": 1,
            },
        }),
        None,
    )
    .await;
    // Running but not ready: the probe fails.
    let pod = h.wait_container("web", "running", |_, c| running(c)).await;
    sleep(Duration::from_secs(2)).await;
    let pod = h.pods().get("web").await.unwrap_or(pod);
    assert_eq!(pod_ready(&pod).as_deref(), Some("False"));
    healthy.store(true, Ordering::SeqCst);
    h.wait_container("web", "ready", |p, c| {
        c.ready && pod_ready(p).as_deref() == Some("True")
    })
    .await;
    healthy.store(false, Ordering::SeqCst);
    let pod = h
        .wait_container("web", "not ready again", |p, c| {
            !c.ready && pod_ready(p).as_deref() == Some("False")
        })
        .await;
    let status = pod
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .expect("a container status");
    assert_eq!(status.restart_count, 0, "readiness never restarts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_liveness_probe_should_restart_the_container() {
    let h = Harness::start(
        NODE,
        test_ca_pem(),
        setpoint_agent::DEFAULT_METRICS_INTERVAL,
    )
    .await;
    let work = tempfile::tempdir().expect("tempdir");
    let sick = work.path().join("sick");
    h.create_pod(
        "live",
        json!({
            "command": ["sh", "-c", "exec sleep 1000"],
            "livenessProbe": {
                "exec": {"command": ["sh", "-c", format!("test ! -f {}", sick.display())]},
                "periodSeconds": 1, "failureThreshold": 2,
            },
        }),
        None,
    )
    .await;
    let first = h.wait_container("live", "running", |_, c| running(c)).await;
    let first_id = first
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.container_id);
    std::fs::write(&sick, "").expect("make it sick");
    h.wait_container("live", "restarted", |_, c| {
        c.restart_count >= 1 && running(c) && c.container_id != first_id
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_probe_should_hold_started_and_ready_until_it_passes() {
    let h = Harness::start(
        NODE,
        test_ca_pem(),
        setpoint_agent::DEFAULT_METRICS_INTERVAL,
    )
    .await;
    let work = tempfile::tempdir().expect("tempdir");
    let up = work.path().join("up");
    h.create_pod(
        "slow",
        json!({
            "command": ["sh", "-c", "exec sleep 1000"],
            "startupProbe": {
                "exec": {"command": ["test", "-f", up.display().to_string()]},
                "periodSeconds": 1, "failureThreshold": 1000,
            },
        }),
        None,
    )
    .await;
    let pod = h.wait_container("slow", "running", |_, c| running(c)).await;
    sleep(Duration::from_secs(2)).await;
    let pod = h.pods().get("slow").await.unwrap_or(pod);
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .expect("a container status");
    assert_eq!(
        status.started,
        Some(false),
        "not started before the probe passes"
    );
    assert!(!status.ready);
    std::fs::write(&up, "").expect("start it");
    h.wait_container("slow", "started and ready", |p, c| {
        c.started == Some(true) && c.ready && pod_ready(p).as_deref() == Some("True")
    })
    .await;
}
