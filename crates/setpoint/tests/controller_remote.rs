//! The controller SDK against a real `setpoint server` over HTTPS, in the situations a
//! controller meets in production: the server restarts, the event history the controller was
//! watching from is gone (a `410 Gone` that forces a relist), and drift that no event reports
//! (repaired by periodic resync). The reconciler is the ConfigMap mirror from the SDK's
//! examples.

use crate::common;

#[path = "../../setpoint-runtime/examples/mirror/mod.rs"]
mod mirror;

use std::sync::Arc;
use std::time::Duration;

use common::{free_loopback_addr, Server};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use setpoint_runtime::{Client, Controller, ControllerError, InformerFactory};
use setpoint_testenv::Running;

const DEADLINE: Duration = Duration::from_secs(60);

fn source(name: &str, color: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(mirror::ENABLED_LABEL.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        data: Some([("color".to_string(), color.to_string())].into()),
        ..Default::default()
    }
}

/// A running mirror controller and its informers; `stop` ends both gracefully.
struct MirrorController {
    factory: InformerFactory,
    running: Running<ControllerError>,
}

impl MirrorController {
    async fn stop(self) {
        self.running.stop().await;
        self.factory.shut_down();
    }
}

fn start(
    client: &Client,
    controller: impl FnOnce(&InformerFactory) -> Controller<ConfigMap>,
) -> MirrorController {
    let factory = InformerFactory::new(client.clone());
    let configmaps = factory.informer::<ConfigMap>().store();
    let controller = controller(&factory);
    let ctx = Arc::new(mirror::Mirror {
        client: client.clone(),
        configmaps,
    });
    let running = Running::spawn(move |shutdown| {
        controller.run(mirror::reconcile, ctx, shutdown.cancelled_owned())
    });
    MirrorController { factory, running }
}

/// Waits until the mirror of `name` exists on the server with `color`.
async fn mirrored(client: &Client, name: &str, color: &str) {
    let api = client.namespaced_api::<ConfigMap>("default");
    let mirror_name = mirror::mirror_name(name);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Ok(Some(cm)) = api.get_opt(&mirror_name).await {
            if cm
                .data
                .as_ref()
                .and_then(|d| d.get("color"))
                .map(String::as_str)
                == Some(color)
            {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{mirror_name} never got color={color}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn client_for(server: &Server) -> Client {
    Client::from_kubeconfig(server.kubeconfig())
        .await
        .expect("a client from the admin kubeconfig")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_should_keep_converging_across_a_server_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let addr = free_loopback_addr();
    let mut server = Server::start_with(&dir, &addr, &[]);
    let client = client_for(&server).await;
    let running = start(&client, mirror::controller);
    let api = client.namespaced_api::<ConfigMap>("default");

    api.create(&PostParams::default(), &source("a", "blue"))
        .await
        .expect("create a");
    mirrored(&client, "a", "blue").await;

    server.kill();
    let server = Server::start_with(&dir, &addr, &[]);

    api.create(&PostParams::default(), &source("b", "red"))
        .await
        .expect("create b after the restart");
    mirrored(&client, "b", "red").await;
    let patch = serde_json::json!({"data": {"color": "green"}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch a");
    mirrored(&client, "a", "green").await;

    running.stop().await;
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_should_relist_when_its_history_is_gone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let addr = free_loopback_addr();
    // Watches can resume only from the last 20 events of a resource.
    let window = ["--watch-cache-window", "20"];
    let mut server = Server::start_with(&dir, &addr, &window);
    let client = client_for(&server).await;
    let running = start(&client, mirror::controller);
    let api = client.namespaced_api::<ConfigMap>("default");
    api.create(&PostParams::default(), &source("a", "blue"))
        .await
        .expect("create a");
    mirrored(&client, "a", "blue").await;

    // While the controller's server is down, another server on the same data makes more
    // changes than the window holds: a deleted mirror (drift) and 30 new sources.
    server.kill();
    {
        let other = Server::start_with(&dir, &free_loopback_addr(), &window);
        let other_client = client_for(&other).await;
        let other_api = other_client.namespaced_api::<ConfigMap>("default");
        other_api
            .delete(&mirror::mirror_name("a"), &DeleteParams::default())
            .await
            .expect("delete a's mirror");
        for i in 0..30 {
            other_api
                .create(&PostParams::default(), &source(&format!("s{i}"), "blue"))
                .await
                .expect("create a source");
        }
    }
    let server = Server::start_with(&dir, &addr, &window);

    // The controller's watch resumes from a resourceVersion the restarted server no longer has
    // the events after: 410 Gone, relist, and every change is reconciled.
    mirrored(&client, "a", "blue").await;
    for i in 0..30 {
        mirrored(&client, &format!("s{i}"), "blue").await;
    }
    let relists: u64 = running
        .factory
        .metrics()
        .iter()
        .map(|(_, m)| m.relists_total)
        .sum();
    assert!(
        relists >= 1,
        "no informer relisted: {:?}",
        running.factory.metrics()
    );

    running.stop().await;
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_should_repair_drift_that_no_event_reports() {
    let server = Server::start();
    let client = client_for(&server).await;
    // This controller does not watch the mirrors it owns: deleting one sends it no event.
    // Only the periodic resync brings it back.
    let running = start(&client, |factory| {
        Controller::<ConfigMap>::new(factory)
            .named("mirror-resync-only")
            .resync(Duration::from_secs(1))
    });
    let api = client.namespaced_api::<ConfigMap>("default");
    api.create(&PostParams::default(), &source("a", "blue"))
        .await
        .expect("create a");
    mirrored(&client, "a", "blue").await;

    api.delete(&mirror::mirror_name("a"), &DeleteParams::default())
        .await
        .expect("delete the mirror");
    mirrored(&client, "a", "blue").await;

    running.stop().await;
}
