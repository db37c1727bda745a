//! The ResourceQuota loop: `status.hard` follows `spec.hard`, `status.used` counts what the
//! namespace's covered objects use (pods' compute, services, claims, object counts), pods
//! that finish or are deleted give their share back, and scopes pick the pods counted.

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ResourceQuota};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops;

const NS: &str = "default";

fn pod(name: &str, resources: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}
    }))
    .expect("pod")
}

async fn used(api: &Api<ResourceQuota>, name: &str) -> Option<Value> {
    let q = api.get(name).await.ok()?;
    serde_json::to_value(q.status?.used?).ok()
}

async fn wait_used(api: &Api<ResourceQuota>, name: &str, want: Value) {
    eventually(&format!("{name} to use {want}"), || async {
        (used(api, name).await? == want).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_should_be_counted_and_given_back() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "resourcequota");
    let quotas = client.namespaced_api::<ResourceQuota>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let maps = client.namespaced_api::<ConfigMap>(NS);
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "10", "requests.cpu": "4", "limits.memory": "4Gi", "configmaps": "5", "count/deployments.apps": "2"}}
    }))
    .expect("quota");
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("create quota");
    wait_used(
        &quotas,
        "q",
        json!({"pods": "0", "requests.cpu": "0", "limits.memory": "0", "configmaps": "0", "count/deployments.apps": "0"}),
    )
    .await;
    let hard = quotas
        .get("q")
        .await
        .expect("get")
        .status
        .expect("status")
        .hard
        .expect("hard");
    assert_eq!(hard.len(), 5, "status.hard follows spec.hard");

    let sized = json!({"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}});
    pods.create(&PostParams::default(), &pod("a", sized.clone()))
        .await
        .expect("a");
    pods.create(&PostParams::default(), &pod("b", sized))
        .await
        .expect("b");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cm"}})).expect("cm");
    maps.create(&PostParams::default(), &cm).await.expect("cm");
    let two = json!({"pods": "2", "requests.cpu": "1", "limits.memory": "2Gi", "configmaps": "1", "count/deployments.apps": "0"});
    wait_used(&quotas, "q", two).await;

    // A finished pod gives its compute back; a deleted one everything.
    pods.patch_status(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("finish a");
    pods.delete(
        "b",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .expect("delete b");
    maps.delete("cm", &DeleteParams::default())
        .await
        .expect("delete cm");
    // The configmap is listed at each sync: the pod events bring the sync that sees it gone.
    wait_used(
        &quotas,
        "q",
        json!({"pods": "0", "requests.cpu": "0", "limits.memory": "0", "configmaps": "0", "count/deployments.apps": "0"}),
    )
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_should_pick_the_pods_counted() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "resourcequota");
    let quotas = client.namespaced_api::<ResourceQuota>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    for (name, scope) in [("best", "BestEffort"), ("sized", "NotBestEffort")] {
        let q: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": name}, "spec": {"hard": {"pods": "5"}, "scopes": [scope]}
        }))
        .expect("quota");
        quotas
            .create(&PostParams::default(), &q)
            .await
            .expect("create quota");
    }
    pods.create(&PostParams::default(), &pod("free", json!({})))
        .await
        .expect("free");
    pods.create(
        &PostParams::default(),
        &pod("one", json!({"requests": {"cpu": "1"}})),
    )
    .await
    .expect("one");
    pods.create(
        &PostParams::default(),
        &pod("two", json!({"limits": {"memory": "1Gi"}})),
    )
    .await
    .expect("two");
    wait_used(&quotas, "best", json!({"pods": "1"})).await;
    wait_used(&quotas, "sized", json!({"pods": "2"})).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_and_claims_should_be_counted() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "resourcequota");
    let quotas = client.namespaced_api::<ResourceQuota>(NS);
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "svc"},
        "spec": {"hard": {"services": "5", "services.nodeports": "5", "persistentvolumeclaims": "2",
                          "requests.storage": "10Gi", "gold.storageclass.storage.k8s.io/requests.storage": "5Gi"}}
    }))
    .expect("quota");
    quotas
        .create(&PostParams::default(), &q)
        .await
        .expect("create quota");
    let services = client.namespaced_api::<k8s_openapi::api::core::v1::Service>(NS);
    let svc = serde_json::from_value(json!({
        "metadata": {"name": "np"},
        "spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]}
    }))
    .expect("service");
    services
        .create(&PostParams::default(), &svc)
        .await
        .expect("service");
    let claims = client.namespaced_api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(NS);
    for (name, class, size) in [("a", "gold", "1Gi"), ("b", "standard", "2Gi")] {
        let c = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class, "resources": {"requests": {"storage": size}}}
        }))
        .expect("claim");
        claims
            .create(&PostParams::default(), &c)
            .await
            .expect("claim");
    }
    wait_used(
        &quotas,
        "svc",
        json!({"services": "1", "services.nodeports": "2", "persistentvolumeclaims": "2",
               "requests.storage": "3Gi", "gold.storageclass.storage.k8s.io/requests.storage": "1Gi"}),
    )
    .await;
    running.stop().await;
}
