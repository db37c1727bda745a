//! Syncs run by hand against a real in-process API server, with a pod cache the test controls:
//! what expectations prevent when the cache lags behind the loop's own writes.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{ListParams, PostParams};
use setpoint_runtime::{Action, Client, EventRecorder, InformerFactory, ObjectKey, Reporter};
use setpoint_testenv::TestEnv;

use super::expectations::{Expectations, EXPECTATIONS_TIMEOUT};
use super::sync::reconcile;
use super::watch::{controller_uid_index, ObservePods, BY_CONTROLLER_UID};
use super::Context;

fn replicaset(name: &str, replicas: i32) -> ReplicaSet {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), name.to_owned())].into();
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some("nginx".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// A sync context over `client` whose pod cache is `factory`'s pod informer (started or not,
/// as the test decides).
fn context(client: &Client, factory: &InformerFactory) -> Arc<Context> {
    let pods = factory.informer::<Pod>();
    pods.add_index(BY_CONTROLLER_UID, controller_uid_index());
    Arc::new(Context {
        client: client.clone(),
        pods: pods.store(),
        expectations: Arc::new(Expectations::default()),
        recorder: EventRecorder::new(client.clone(), Reporter::new("test", "test")),
    })
}

async fn pod_count(client: &Client) -> usize {
    client
        .namespaced_api::<Pod>("default")
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .len()
}

async fn create(client: &Client, rs: &ReplicaSet) -> Arc<ReplicaSet> {
    let created = client
        .namespaced_api::<ReplicaSet>("default")
        .create(&PostParams::default(), rs)
        .await
        .expect("create replicaset");
    Arc::new(created)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_should_not_create_twice_while_its_creates_are_unobserved() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    // The pod informer is never started: its cache stays empty, as stale as a cache can be.
    let ctx = context(&client, &InformerFactory::new(client.clone()));
    let rs = create(&client, &replicaset("web", 3)).await;

    let _ = reconcile(rs.clone(), ctx.clone())
        .await
        .expect("first sync");
    assert_eq!(pod_count(&client).await, 3);
    let second = reconcile(rs.clone(), ctx.clone())
        .await
        .expect("second sync");
    assert_eq!(
        pod_count(&client).await,
        3,
        "a stale cache must not cause more creates"
    );
    assert!(
        matches!(second, Action::RequeueAfter(d) if d <= EXPECTATIONS_TIMEOUT + Duration::from_secs(1)),
        "it looks again once the record expires at the latest: {second:?}"
    );

    // The guard is what held it back: without the record, the same stale cache creates again.
    ctx.expectations.forget(&ObjectKey::of(rs.as_ref()));
    let _ = reconcile(rs, ctx).await.expect("unguarded sync");
    assert_eq!(pod_count(&client).await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_should_act_again_once_the_cache_shows_its_creates() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let factory = InformerFactory::new(client.clone());
    let ctx = context(&client, &factory);
    let _observe = factory
        .informer::<Pod>()
        .add_handler(ObservePods::<ReplicaSet> {
            expectations: ctx.expectations.clone(),
            kind: std::marker::PhantomData,
        });
    factory.start();
    factory.wait_for_sync().await;
    let rs = create(&client, &replicaset("api", 2)).await;
    let key = ObjectKey::of(rs.as_ref());

    let _ = reconcile(rs.clone(), ctx.clone())
        .await
        .expect("first sync");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ctx.expectations.satisfied(&key) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "creates never observed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        reconcile(rs, ctx.clone()).await.expect("second sync"),
        Action::await_change()
    );
    assert_eq!(pod_count(&client).await, 2);
    assert_eq!(ctx.pods.len(), 2);
}
