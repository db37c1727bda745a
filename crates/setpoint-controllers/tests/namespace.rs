//! The namespace loop against a real in-process API server: deleting a namespace deletes its
//! content, then the namespace; content held by a finalizer keeps it `Terminating` with
//! conditions that name what is left, until the finalizer goes.

use crate::common;

use common::run_loops;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, NamespaceCondition, Pod, Secret};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use setpoint_runtime::Client;
use setpoint_testenv::eventually;
use setpoint_testenv::TestEnv;

async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    client
        .api::<Namespace>()
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

async fn create_configmap(client: &Client, ns: &str, name: &str, finalizers: &[&str]) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "finalizers": finalizers},
        "data": {"k": "v"},
    }))
    .expect("configmap");
    client
        .namespaced_api::<ConfigMap>(ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create configmap");
}

async fn gone(api: &Api<Namespace>, name: &str) -> bool {
    matches!(api.get(name).await, Err(kube::Error::Api(s)) if s.code == 404)
}

fn condition<'a>(ns: &'a Namespace, type_: &str) -> Option<&'a NamespaceCondition> {
    ns.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

// Regression: a status write to a terminating namespace without metadata.finalizers removed it
// at once, although its spec.finalizers still held it.
#[tokio::test]
async fn a_status_write_should_not_remove_a_namespace_its_spec_finalizers_hold() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    create_namespace(&client, "held").await;
    let api = client.api::<Namespace>();
    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let mut ns = api.get("held").await.expect("still there, Terminating");
    ns.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(NamespaceCondition {
            type_: "NamespaceContentRemaining".to_owned(),
            status: "True".to_owned(),
            ..NamespaceCondition::default()
        });
    api.replace_status("held", &PostParams::default(), &ns)
        .await
        .expect("status written");
    let ns = api
        .get("held")
        .await
        .expect("a status write does not remove it");
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
}

#[tokio::test]
async fn deleting_a_namespace_should_delete_its_content_then_the_namespace() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "namespace");
    for ns in ["demo", "kept"] {
        create_namespace(&client, ns).await;
        create_configmap(&client, ns, "one", &[]).await;
        create_configmap(&client, ns, "two", &[]).await;
    }
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}))
            .expect("secret");
    client
        .namespaced_api::<Secret>("demo")
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }))
    .expect("deployment");
    client
        .namespaced_api::<Deployment>("demo")
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");

    let namespaces = client.api::<Namespace>();
    namespaces
        .delete("demo", &DeleteParams::default())
        .await
        .expect("delete namespace");
    eventually("namespace demo to be removed", || async {
        gone(&namespaces, "demo").await.then_some(())
    })
    .await;

    let lp = ListParams::default();
    let configmaps = client.namespaced_api::<ConfigMap>("demo").list(&lp).await;
    assert!(configmaps.expect("list").items.is_empty());
    let secrets = client.namespaced_api::<Secret>("demo").list(&lp).await;
    assert!(secrets.expect("list").items.is_empty());
    let deployments = client.namespaced_api::<Deployment>("demo").list(&lp).await;
    assert!(deployments.expect("list").items.is_empty());
    // Another namespace is left alone.
    let kept = client.namespaced_api::<ConfigMap>("kept").list(&lp).await;
    assert_eq!(kept.expect("list").items.len(), 2);
    assert!(!gone(&namespaces, "kept").await);

    running.stop().await;
}

#[tokio::test]
async fn content_with_a_finalizer_should_hold_the_namespace_until_released() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "namespace");
    create_namespace(&client, "held").await;
    create_configmap(&client, "held", "pinned", &["example.com/hold"]).await;
    create_configmap(&client, "held", "loose", &[]).await;

    let namespaces = client.api::<Namespace>();
    namespaces
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let ns = eventually("the conditions to name the held content", || async {
        let ns = namespaces.get("held").await.ok()?;
        let remaining = condition(&ns, "NamespaceFinalizersRemaining")?;
        (remaining.status == "True").then_some(ns)
    })
    .await;
    let content = condition(&ns, "NamespaceContentRemaining").expect("content condition");
    assert_eq!(content.status, "True");
    assert_eq!(content.reason.as_deref(), Some("SomeResourcesRemain"));
    assert_eq!(
        content.message.as_deref(),
        Some("Some resources are remaining: configmaps. has 1 resource instances")
    );
    let finalizers = condition(&ns, "NamespaceFinalizersRemaining").expect("finalizers condition");
    assert_eq!(finalizers.reason.as_deref(), Some("SomeFinalizersRemain"));
    assert_eq!(
        finalizers.message.as_deref(),
        Some("Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    );
    let failure = condition(&ns, "NamespaceDeletionContentFailure").expect("failure condition");
    assert_eq!(
        (failure.status.as_str(), failure.reason.as_deref()),
        ("False", Some("ContentDeleted"))
    );
    assert_eq!(
        ns.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    let configmaps = client.namespaced_api::<ConfigMap>("held");
    let left: Vec<String> = configmaps
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(left, vec!["pinned".to_owned()]);

    configmaps
        .patch(
            "pinned",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release the finalizer");
    eventually("namespace held to be removed", || async {
        gone(&namespaces, "held").await.then_some(())
    })
    .await;

    running.stop().await;
}

// Regression (issue 14.2): deleting a pod whose grace period is the largest int64 panicked in
// the API server (500), so the namespace loop failed every pass and backed off, and the
// namespace stayed Terminating with a content failure.
#[tokio::test]
async fn a_pod_with_the_largest_grace_period_should_be_deleted_like_any_other() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "namespace");
    create_namespace(&client, "patient").await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "forever"},
        "spec": {
            "nodeName": "node-1",
            "terminationGracePeriodSeconds": i64::MAX,
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }))
    .expect("pod");
    let pods = client.namespaced_api::<Pod>("patient");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("a grace period of 2^63 - 1 is accepted");

    let namespaces = client.api::<Namespace>();
    namespaces
        .delete("patient", &DeleteParams::default())
        .await
        .expect("delete namespace");
    // The loop deletes the pod gracefully: it waits for its node to stop it.
    let deleting = eventually("the pod to be marked for deletion", || async {
        let pod = pods.get("forever").await.ok()?;
        pod.metadata.deletion_timestamp.is_some().then_some(pod)
    })
    .await;
    assert_eq!(
        deleting.metadata.deletion_grace_period_seconds,
        Some(i64::MAX)
    );
    let ns = eventually("the conditions to say pods remain", || async {
        let ns = namespaces.get("patient").await.ok()?;
        let remaining = condition(&ns, "NamespaceContentRemaining")?;
        (remaining.status == "True").then_some(ns)
    })
    .await;
    let failure = condition(&ns, "NamespaceDeletionContentFailure").expect("failure condition");
    assert_eq!(
        (failure.status.as_str(), failure.reason.as_deref()),
        ("False", Some("ContentDeleted"))
    );

    running.stop().await;
}
