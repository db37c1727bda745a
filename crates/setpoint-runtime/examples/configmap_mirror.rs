//! A minimal controller, in-process: a real Setpoint API server and the ConfigMap mirror
//! controller in one process, talking through the SDK's in-process transport.
//!
//! ```sh
//! cargo run -p setpoint-runtime --example configmap_mirror
//! ```
//!
//! Creates a ConfigMap asking for a mirror, waits for the controller to create the mirror,
//! changes the source and deletes the mirror (drift), and shows the controller repairing both.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use setpoint_runtime::{InformerFactory, ObjectKey};
use setpoint_testenv::TestEnv;

mod mirror;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let env = TestEnv::start().await?;
    let client = env.client();

    let factory = InformerFactory::new(client.clone());
    let configmaps = factory.informer::<ConfigMap>().store();
    let controller = mirror::controller(&factory);
    let handle = controller.handle();
    let ctx = Arc::new(mirror::Mirror {
        client: client.clone(),
        configmaps: configmaps.clone(),
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(mirror::reconcile, ctx, async {
        let _ = stopped.await;
    }));

    let api = client.namespaced_api::<ConfigMap>("default");
    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            labels: Some([(mirror::ENABLED_LABEL.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        data: Some([("color".to_string(), "blue".to_string())].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &source).await?;
    let mirror_key = ObjectKey::namespaced("default", mirror::mirror_name("settings"));
    let seen = wait_for(&configmaps, &mirror_key, "blue").await;
    println!("mirror created: {mirror_key} data={:?}", seen.data);

    let patch = serde_json::json!({"data": {"color": "green"}});
    api.patch("settings", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let seen = wait_for(&configmaps, &mirror_key, "green").await;
    println!("mirror followed the source: data={:?}", seen.data);

    api.delete(&mirror_key.name, &DeleteParams::default())
        .await?;
    let seen = wait_for(&configmaps, &mirror_key, "green").await;
    println!(
        "mirror deleted by hand and recreated: uid={:?}",
        seen.metadata.uid
    );

    let _ = stop.send(());
    running.await??;
    let m = handle.metrics();
    println!(
        "reconciles: {} succeeded, {} failed; mean reconcile {:?}",
        m.reconcile_success_total,
        m.reconcile_error_total,
        m.reconcile_duration.mean()
    );
    Ok(())
}

async fn wait_for(
    store: &setpoint_runtime::ObjectCache<ConfigMap>,
    key: &ObjectKey,
    color: &str,
) -> Arc<ConfigMap> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(cm) = store.get(key) {
            if cm
                .data
                .as_ref()
                .and_then(|d| d.get("color"))
                .map(String::as_str)
                == Some(color)
            {
                return cm;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key} did not reach color={color}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
