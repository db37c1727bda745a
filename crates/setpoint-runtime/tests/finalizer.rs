//! Finalizers against a real in-process API server: added before anything else runs, cleanup
//! once on deletion and then the object goes, a failing cleanup keeps object and finalizer, and
//! guarded writes never overwrite a concurrent change of the finalizer list.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use setpoint_runtime::{
    add_finalizer, finalizer, remove_finalizer, Action, Finalized, FinalizerError, FinalizerEvent,
};
use setpoint_testenv::TestEnv;

const FINALIZER: &str = "example.com/cleanup";

#[derive(Debug, thiserror::Error)]
#[error("cleanup failed on purpose")]
struct Boom;

/// Counts how often each branch ran; cleanup fails while `fail_cleanup` is set.
#[derive(Default)]
struct Calls {
    apply: AtomicU32,
    cleanup: AtomicU32,
}

async fn run(
    api: &kube::Api<ConfigMap>,
    obj: ConfigMap,
    calls: &Calls,
    fail_cleanup: bool,
) -> Result<Finalized<Action>, FinalizerError<Boom>> {
    finalizer(api, FINALIZER, Arc::new(obj), |event| async move {
        match event {
            FinalizerEvent::Apply(_) => {
                calls.apply.fetch_add(1, Ordering::SeqCst);
                Ok(Action::AwaitChange)
            }
            FinalizerEvent::Cleanup(_) => {
                calls.cleanup.fetch_add(1, Ordering::SeqCst);
                if fail_cleanup {
                    Err(Boom)
                } else {
                    Ok(Action::AwaitChange)
                }
            }
        }
    })
    .await
}

async fn setup() -> (TestEnv, kube::Api<ConfigMap>) {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>("default");
    api.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("cm".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect("create");
    (env, api)
}

fn finalizers(cm: &ConfigMap) -> Vec<String> {
    cm.metadata.finalizers.clone().unwrap_or_default()
}

#[tokio::test]
async fn finalizer_should_be_added_before_apply_runs() {
    let (_env, api) = setup().await;
    let calls = Calls::default();

    let first = run(&api, api.get("cm").await.expect("get"), &calls, false)
        .await
        .expect("first reconcile");
    assert_eq!(first, Finalized::FinalizerAdded);
    assert_eq!(calls.apply.load(Ordering::SeqCst), 0);
    let cm = api.get("cm").await.expect("get");
    assert_eq!(finalizers(&cm), vec![FINALIZER]);

    let second = run(&api, cm, &calls, false)
        .await
        .expect("second reconcile");
    assert_eq!(second, Finalized::Applied(Action::AwaitChange));
    assert_eq!(calls.apply.load(Ordering::SeqCst), 1);
    assert_eq!(
        finalizers(&api.get("cm").await.expect("get")),
        vec![FINALIZER]
    );
}

#[tokio::test]
async fn deletion_should_run_cleanup_once_and_then_let_the_object_go() {
    let (_env, api) = setup().await;
    let calls = Calls::default();
    run(&api, api.get("cm").await.expect("get"), &calls, false)
        .await
        .expect("add finalizer");

    api.delete("cm", &DeleteParams::default())
        .await
        .expect("delete");
    let deleting = api.get("cm").await.expect("kept by the finalizer");
    assert!(deleting.metadata.deletion_timestamp.is_some());

    let done = run(&api, deleting, &calls, false).await.expect("cleanup");
    assert_eq!(done, Finalized::CleanedUp(Action::AwaitChange));
    assert_eq!(calls.cleanup.load(Ordering::SeqCst), 1);
    assert_eq!(calls.apply.load(Ordering::SeqCst), 0);
    assert!(
        api.get_opt("cm").await.expect("get").is_none(),
        "object gone"
    );
}

#[tokio::test]
async fn failing_cleanup_should_keep_the_finalizer_and_the_object() {
    let (_env, api) = setup().await;
    let calls = Calls::default();
    run(&api, api.get("cm").await.expect("get"), &calls, false)
        .await
        .expect("add finalizer");
    api.delete("cm", &DeleteParams::default())
        .await
        .expect("delete");

    let deleting = api.get("cm").await.expect("get");
    let err = run(&api, deleting, &calls, true)
        .await
        .expect_err("cleanup fails");
    assert!(matches!(err, FinalizerError::CleanupFailed(Boom)), "{err}");
    let still = api.get("cm").await.expect("object kept");
    assert_eq!(finalizers(&still), vec![FINALIZER]);
    assert!(still.metadata.deletion_timestamp.is_some());

    // The retry succeeds, and only then does the object go.
    let done = run(&api, still, &calls, false).await.expect("cleanup");
    assert_eq!(done, Finalized::CleanedUp(Action::AwaitChange));
    assert_eq!(calls.cleanup.load(Ordering::SeqCst), 2);
    assert!(api.get_opt("cm").await.expect("get").is_none());
}

#[tokio::test]
async fn deleting_object_without_our_finalizer_should_run_nothing() {
    let (_env, api) = setup().await;
    add_finalizer(&api, "cm", "other.example.com/keep")
        .await
        .expect("someone else's finalizer");
    api.delete("cm", &DeleteParams::default())
        .await
        .expect("delete");
    let calls = Calls::default();
    let done = run(&api, api.get("cm").await.expect("get"), &calls, false)
        .await
        .expect("nothing to do");
    assert_eq!(done, Finalized::AlreadyFinalized);
    assert_eq!(calls.apply.load(Ordering::SeqCst), 0);
    assert_eq!(calls.cleanup.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn stale_object_should_not_overwrite_a_concurrent_finalizer_change() {
    let (_env, api) = setup().await;
    let stale = api.get("cm").await.expect("get");
    // Another writer adds its finalizer after we read.
    add_finalizer(&api, "cm", "other.example.com/keep")
        .await
        .expect("other finalizer");

    let calls = Calls::default();
    let err = run(&api, stale, &calls, false)
        .await
        .expect_err("guarded write refused");
    match &err {
        FinalizerError::Add { source, .. } => {
            assert!(
                matches!(source, kube::Error::Api(s) if s.code == 422),
                "{source:?}"
            );
        }
        other => panic!("expected an add error, got {other}"),
    }
    assert_eq!(
        finalizers(&api.get("cm").await.expect("get")),
        vec!["other.example.com/keep"]
    );

    // With the fresh object it goes through, keeping the other finalizer.
    let fresh = api.get("cm").await.expect("get");
    assert_eq!(
        run(&api, fresh, &calls, false).await.expect("add"),
        Finalized::FinalizerAdded
    );
    assert_eq!(
        finalizers(&api.get("cm").await.expect("get")),
        vec!["other.example.com/keep", FINALIZER]
    );
}

#[tokio::test]
async fn standalone_add_and_remove_should_be_idempotent() {
    let (_env, api) = setup().await;
    let added = add_finalizer(&api, "cm", FINALIZER).await.expect("add");
    assert_eq!(finalizers(&added), vec![FINALIZER]);
    let version = added.metadata.resource_version.clone();
    let again = add_finalizer(&api, "cm", FINALIZER)
        .await
        .expect("add again");
    assert_eq!(again.metadata.resource_version, version, "no second write");

    let removed = remove_finalizer(&api, "cm", FINALIZER)
        .await
        .expect("remove")
        .expect("object still there");
    assert!(finalizers(&removed).is_empty());
    let again = remove_finalizer(&api, "cm", FINALIZER)
        .await
        .expect("remove again")
        .expect("object still there");
    assert_eq!(
        again.metadata.resource_version, removed.metadata.resource_version,
        "no second write"
    );

    // Removing the last finalizer of an object being deleted lets it go.
    add_finalizer(&api, "cm", FINALIZER).await.expect("add");
    api.delete("cm", &DeleteParams::default())
        .await
        .expect("delete");
    remove_finalizer(&api, "cm", FINALIZER)
        .await
        .expect("remove");
    assert!(api.get_opt("cm").await.expect("get").is_none());
    assert!(remove_finalizer(&api, "cm", FINALIZER)
        .await
        .expect("remove from a missing object")
        .is_none());
}
