//! Custom resources defined as Rust types (kube's `CustomResource` derive) against a real
//! in-process API server: the derived CRD installs and is established, its generated schema is
//! enforced, and the SDK works on the custom kind as on built-ins — typed client, a typed
//! controller that owns ConfigMaps, patches status, holds a finalizer and records events, and a
//! dynamic (untyped) informer.
//!
//! Real time, polling with generous deadlines; no assertion on how long anything took.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use setpoint_runtime::{
    finalizer, install_crd, update_status, Action, Client, Controller, EventDetails, EventRecorder,
    FinalizerEvent, InformerFactory, InformerOptions, ObjectKey, Reporter,
};
use setpoint_testenv::eventually;
use setpoint_testenv::TestEnv;
use tokio::sync::oneshot;

const NS: &str = "default";
const FINALIZER: &str = "test.setpoint.dev/cleanup";

/// A widget: its ConfigMap `<name>-paint` holds its color.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "test.setpoint.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd"
)]
struct WidgetSpec {
    color: String,
    size: i32,
}

/// What the controller last did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
struct WidgetStatus {
    painted: Option<String>,
}

async fn env_with_crd() -> TestEnv {
    let env = TestEnv::start().await.expect("test env");
    install_crd(&env.client(), &Widget::crd(), Duration::from_secs(30))
        .await
        .expect("CRD established");
    env
}

fn widget(name: &str, color: &str) -> Widget {
    let mut w = Widget::new(
        name,
        WidgetSpec {
            color: color.into(),
            size: 3,
        },
    );
    w.metadata.namespace = Some(NS.into());
    w
}

#[tokio::test]
async fn derived_crd_should_be_established_and_enforce_its_schema() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let first = install_crd(&client, &Widget::crd(), Duration::from_secs(30))
        .await
        .expect("CRD established");
    // Installing again with the same spec (the stored one has server defaults besides) writes
    // no new spec and still reports it established.
    let again = install_crd(&client, &Widget::crd(), Duration::from_secs(30))
        .await
        .expect("idempotent install");
    assert_eq!(again.spec.names.kind, "Widget");
    assert_eq!(again.metadata.generation, first.metadata.generation);
    // A changed spec is written: a new printer column.
    let mut changed = Widget::crd();
    changed.spec.versions[0].additional_printer_columns = Some(vec![
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition {
            name: "Color".into(),
            type_: "string".into(),
            json_path: ".spec.color".into(),
            ..Default::default()
        },
    ]);
    let updated = install_crd(&client, &changed, Duration::from_secs(30))
        .await
        .expect("updated install");
    assert_ne!(updated.metadata.generation, first.metadata.generation);

    let widgets = client.namespaced_api::<Widget>(NS);
    let created = widgets
        .create(&PostParams::default(), &widget("a", "red"))
        .await
        .expect("create widget");
    assert_eq!(created.spec.color, "red");
    assert!(created.status.is_none());

    // The generated schema says `size` is an integer: a string is refused with a 422.
    let resource = ApiResource::erase::<Widget>(&());
    let dynamic = client.dynamic_api(&resource, Some(NS));
    let mut bad = DynamicObject::new("bad", &resource);
    bad.data = json!({"spec": {"color": "blue", "size": "big"}});
    match dynamic.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 422, "{status:?}"),
        other => panic!("expected 422 for a string size, got {other:?}"),
    }
}

/// The test controller's context: a client, and the widgets cleaned up.
struct Painter {
    client: Client,
    recorder: EventRecorder,
    cleaned: Mutex<Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct PaintError(String);

async fn paint(widget: Arc<Widget>, ctx: Arc<Painter>) -> Result<Action, PaintError> {
    let ns = widget.namespace().unwrap_or_default();
    let widgets = ctx.client.namespaced_api::<Widget>(&ns);
    let done = finalizer(&widgets, FINALIZER, widget, |event| async {
        match event {
            FinalizerEvent::Apply(w) => apply(&w, &ctx).await,
            FinalizerEvent::Cleanup(w) => {
                ctx.cleaned.lock().push(w.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| PaintError(e.to_string()))?;
    Ok(done.action())
}

async fn apply(w: &Widget, ctx: &Painter) -> Result<Action, PaintError> {
    let ns = w.namespace().unwrap_or_default();
    let owner = w
        .controller_owner_ref(&())
        .ok_or_else(|| PaintError("widget without uid".into()))?;
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-paint", w.name_any())),
            namespace: Some(ns.clone()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some([("color".to_owned(), w.spec.color.clone())].into()),
        ..Default::default()
    };
    let configmaps = ctx.client.namespaced_api::<ConfigMap>(&ns);
    let params = PatchParams::default();
    let name = format!("{}-paint", w.name_any());
    let patched = match configmaps.get_opt(&name).await {
        Ok(Some(_)) => configmaps.patch(&name, &params, &Patch::Merge(&cm)).await,
        Ok(None) => configmaps.create(&PostParams::default(), &cm).await,
        Err(e) => Err(e),
    };
    patched.map_err(|e| PaintError(e.to_string()))?;
    let color = w.spec.color.clone();
    update_status(
        &ctx.client.namespaced_api::<Widget>(&ns),
        &w.name_any(),
        |w| {
            w.status.get_or_insert_with(WidgetStatus::default).painted = Some(color.clone());
        },
    )
    .await
    .map_err(|e| PaintError(e.to_string()))?;
    ctx.recorder.publish_for(
        w,
        EventDetails::normal("Painted", "Paint").with_note(w.spec.color.clone()),
    );
    Ok(Action::await_change())
}

async fn paint_color(client: &Client, name: &str) -> Option<String> {
    let cm = client
        .namespaced_api::<ConfigMap>(NS)
        .get_opt(&format!("{name}-paint"))
        .await
        .ok()??;
    cm.data?.get("color").cloned()
}

#[tokio::test]
async fn typed_controller_should_own_patch_status_finalize_and_record_events() {
    let env = env_with_crd().await;
    let client = env.client();
    let factory = InformerFactory::new(client.clone());
    let controller = Controller::<Widget>::new(&factory)
        .named("painter")
        .owns::<ConfigMap>();
    let ctx = Arc::new(Painter {
        client: client.clone(),
        recorder: EventRecorder::new(client.clone(), Reporter::new("painter", "painter-0")),
        cleaned: Mutex::new(Vec::new()),
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(paint, ctx.clone(), async {
        let _ = stopped.await;
    }));

    let widgets = client.namespaced_api::<Widget>(NS);
    widgets
        .create(&PostParams::default(), &widget("w1", "red"))
        .await
        .expect("create widget");
    eventually("the paint ConfigMap is red", || async {
        (paint_color(&client, "w1").await? == "red").then_some(())
    })
    .await;
    let w1 = eventually("the status says painted red", || async {
        let w = widgets.get("w1").await.ok()?;
        (w.status.as_ref()?.painted.as_deref() == Some("red")).then_some(w)
    })
    .await;
    assert_eq!(w1.finalizers(), [FINALIZER.to_owned()]);
    let cm = client
        .namespaced_api::<ConfigMap>(NS)
        .get("w1-paint")
        .await
        .expect("paint");
    let owner = &cm.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Widget", Some(true))
    );
    assert_eq!(Some(&owner.uid), w1.meta().uid.as_ref());

    // Owned ConfigMap deleted by hand: the controller puts it back (owns → enqueue owner).
    client
        .namespaced_api::<ConfigMap>(NS)
        .delete("w1-paint", &DeleteParams::default())
        .await
        .expect("delete paint");
    eventually("the paint ConfigMap is back", || async {
        paint_color(&client, "w1").await.map(|_| ())
    })
    .await;

    // Spec change: followed.
    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "green"}})),
        )
        .await
        .expect("recolor");
    eventually("the paint ConfigMap is green", || async {
        (paint_color(&client, "w1").await? == "green").then_some(())
    })
    .await;

    // Events about the Widget were recorded.
    eventually("a Painted event regards the widget", || async {
        let events = client
            .namespaced_api::<Event>(NS)
            .list(&ListParams::default())
            .await
            .ok()?;
        events
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Painted")
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Widget")
            })
            .then_some(())
    })
    .await;

    // Deletion: the finalizer's cleanup runs, then the widget goes.
    widgets
        .delete("w1", &DeleteParams::default())
        .await
        .expect("delete widget");
    eventually("the widget is gone", || async {
        widgets.get_opt("w1").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(*ctx.cleaned.lock(), ["w1".to_owned()]);

    let _ = stop.send(());
    task.await.expect("no panic").expect("clean shutdown");
}

#[tokio::test]
async fn dynamic_informer_should_cache_custom_objects() {
    let env = env_with_crd().await;
    let client = env.client();
    let widgets = client.namespaced_api::<Widget>(NS);
    widgets
        .create(&PostParams::default(), &widget("before", "red"))
        .await
        .expect("create widget");
    let factory = InformerFactory::new(client.clone());
    let resource = ApiResource::erase::<Widget>(&());
    let informer = factory.dynamic_informer(&resource, InformerOptions::default());
    let typed = factory.informer::<Widget>();
    factory.start();
    factory.wait_for_sync().await;
    let cached = informer
        .store()
        .get(&ObjectKey::namespaced(NS, "before"))
        .expect("cached before start");
    assert_eq!(cached.data["spec"]["color"], "red");
    assert_eq!(
        cached.types.as_ref().map(|t| t.kind.as_str()),
        Some("Widget")
    );

    widgets
        .create(&PostParams::default(), &widget("after", "blue"))
        .await
        .expect("create widget");
    let store = informer.store();
    let after = eventually("the dynamic cache has the new widget", || async {
        store.get(&ObjectKey::namespaced(NS, "after"))
    })
    .await;
    assert_eq!(after.data["spec"]["size"], 3);
    let typed_store = typed.store();
    let typed_after = eventually("the typed cache has it too", || async {
        typed_store.get(&ObjectKey::namespaced(NS, "after"))
    })
    .await;
    assert_eq!(typed_after.spec.color, "blue");
    factory.shut_down();
}
