//! The in-process transport carries every kind of request the SDK makes: create, get, list with
//! selectors, conflicting updates, and watches that stream.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use setpoint_testenv::TestEnv;

fn configmap(name: &str, label: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_string(), label.to_string())].into()),
            ..Default::default()
        },
        data: Some([("k".to_string(), "v".to_string())].into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn in_process_client_should_create_list_conflict_and_watch() {
    let env = TestEnv::start().await.expect("test env starts");
    let api = env.client().namespaced_api::<ConfigMap>("default");

    let created = api
        .create(&PostParams::default(), &configmap("a", "x"))
        .await
        .expect("create");
    let rv = created.metadata.resource_version.clone().expect("rv set");
    api.create(&PostParams::default(), &configmap("b", "y"))
        .await
        .expect("create b");

    let listed = api
        .list(&ListParams::default().labels("app=x"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("a"));

    let mut stale = created.clone();
    stale.data = Some([("k".to_string(), "w".to_string())].into());
    api.replace("a", &PostParams::default(), &stale)
        .await
        .expect("first update");
    let err = api
        .replace("a", &PostParams::default(), &stale)
        .await
        .expect_err("stale update conflicts");
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 409),
        other => panic!("expected a 409, got {other:?}"),
    }

    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let first = events
        .try_next()
        .await
        .expect("event")
        .expect("stream open");
    match first {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b's ADDED, got {other:?}"),
    }
    let second = events.next().await.expect("event").expect("ok");
    assert!(matches!(second, WatchEvent::Modified(_)), "{second:?}");
}
