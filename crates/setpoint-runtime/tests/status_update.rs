//! Status updates against a real in-process API server: a conflicting writer makes the update
//! re-read and re-apply its mutation (keeping the other writer's change), an unchanged status
//! is not written, conflicts are retried a bounded number of times, and only the status is
//! written.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::PostParams;
use setpoint_runtime::{
    update_status, update_status_with, ConflictRetry, StatusError, StatusUpdate,
};
use setpoint_testenv::TestEnv;

fn deployment(name: &str) -> Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), name.to_owned())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(2),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some("nginx".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// Another writer's status change, made synchronously from inside a mutation (the mutation is
/// a plain closure, so it blocks this worker thread while the write runs).
fn competing_write(api: &kube::Api<Deployment>, name: &str, available: i32) {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let mut current = api.get(name).await.expect("get");
            current
                .status
                .get_or_insert_with(DeploymentStatus::default)
                .available_replicas = Some(available);
            api.replace_status(name, &PostParams::default(), &current)
                .await
                .expect("competing write");
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_update_should_reapply_the_mutation_after_a_conflicting_write() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<Deployment>("default");
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let mut calls = 0;
    let updated = update_status(&api, "web", |d: &mut Deployment| {
        calls += 1;
        if calls == 1 {
            // Someone else writes between our read and our write.
            competing_write(&api, "web", 1);
        }
        let replicas = d.spec.as_ref().and_then(|s| s.replicas);
        d.status
            .get_or_insert_with(DeploymentStatus::default)
            .replicas = replicas;
    })
    .await
    .expect("update");

    assert_eq!(
        calls, 2,
        "a conflict, then a fresh read and a second mutation"
    );
    let StatusUpdate::Updated(written) = updated else {
        panic!("expected a write, got {updated:?}");
    };
    let status = written.status.expect("status");
    assert_eq!(status.replicas, Some(2), "our change");
    assert_eq!(
        status.available_replicas,
        Some(1),
        "the other writer's change survives"
    );
    let stored = api.get("web").await.expect("get").status.expect("status");
    assert_eq!(stored, status);
}

#[tokio::test]
async fn status_update_should_not_write_an_unchanged_status() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<Deployment>("default");
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");
    let set_replicas = |d: &mut Deployment| {
        d.status
            .get_or_insert_with(DeploymentStatus::default)
            .replicas = Some(2);
    };
    let first = update_status(&api, "web", set_replicas)
        .await
        .expect("first update");
    assert!(matches!(first, StatusUpdate::Updated(_)));
    let version = first.into_object().metadata.resource_version;

    let second = update_status(&api, "web", set_replicas)
        .await
        .expect("second update");
    let StatusUpdate::Unchanged(read) = second else {
        panic!("expected no write, got {second:?}");
    };
    assert_eq!(read.metadata.resource_version, version);
    let stored = api.get("web").await.expect("get");
    assert_eq!(stored.metadata.resource_version, version, "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_update_should_give_up_after_the_configured_attempts() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<Deployment>("default");
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let mut calls = 0;
    let retry = ConflictRetry {
        attempts: 3,
        ..ConflictRetry::default()
    };
    let result = update_status_with(&api, "web", retry, |d: &mut Deployment| {
        calls += 1;
        competing_write(&api, "web", calls);
        d.status
            .get_or_insert_with(DeploymentStatus::default)
            .replicas = Some(2);
    })
    .await;
    match result {
        Err(StatusError::Conflict { attempts, .. }) => assert_eq!(attempts, 3),
        other => panic!("expected a conflict error, got {other:?}"),
    }
    assert_eq!(calls, 3);
    let status = api.get("web").await.expect("get").status.expect("status");
    assert_eq!(status.replicas, None, "our write never landed");
    assert_eq!(status.available_replicas, Some(3));
}

#[tokio::test]
async fn status_update_should_write_only_the_status() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<Deployment>("default");
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");
    let written = update_status(&api, "web", |d: &mut Deployment| {
        if let Some(spec) = d.spec.as_mut() {
            spec.replicas = Some(9);
        }
        d.status
            .get_or_insert_with(DeploymentStatus::default)
            .ready_replicas = Some(1);
    })
    .await
    .expect("update")
    .into_object();
    assert_eq!(written.spec.and_then(|s| s.replicas), Some(2));
    assert_eq!(written.status.and_then(|s| s.ready_replicas), Some(1));
}

#[tokio::test]
async fn status_update_should_report_a_missing_object() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<Deployment>("default");
    let called = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = called.clone();
    let err = update_status(&api, "missing", move |_: &mut Deployment| {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    })
    .await
    .expect_err("no such object");
    assert!(matches!(err, StatusError::Get { .. }), "{err:?}");
    assert!(!called.load(std::sync::atomic::Ordering::SeqCst));
}
