//! The ReplicationController loop (the ReplicaSet loop over ReplicationControllers): pods
//! created from the template with the RC as their controller, scaling up and down, a deleted
//! pod replaced, an orphan matching the map selector adopted, and the status counted.

use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops;

const NS: &str = "default";

fn rc(name: &str, replicas: i32) -> ReplicationController {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"app": name},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    }))
    .expect("rc")
}

async fn active(api: &Api<Pod>, app: &str) -> Vec<Pod> {
    let list = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods");
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

async fn wait_for(api: &Api<Pod>, app: &str, n: usize) -> Vec<Pod> {
    eventually(&format!("{n} pods of {app}"), || async {
        let pods = active(api, app).await;
        (pods.len() == n).then_some(pods)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_controller_should_keep_its_replicas() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "replicationcontroller");
    let rcs = client.namespaced_api::<ReplicationController>(NS);
    let pods = client.namespaced_api::<Pod>(NS);

    // An orphan the selector matches is adopted, so only two are created.
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-orphan", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &orphan)
        .await
        .expect("orphan");
    let created = rcs
        .create(&PostParams::default(), &rc("web", 3))
        .await
        .expect("create rc");
    let three = wait_for(&pods, "web", 3).await;
    for pod in &three {
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str()
            ),
            ("v1", "ReplicationController", "web")
        );
        assert_eq!(Some(&owner.uid), created.metadata.uid.as_ref());
        assert_eq!(owner.controller, Some(true));
    }
    assert!(
        three.iter().any(|p| p.name_any() == "web-orphan"),
        "the orphan is adopted"
    );
    eventually("status.replicas 3", || async {
        let rc = rcs.get("web").await.ok()?;
        let status = rc.status?;
        (status.replicas == 3
            && status.fully_labeled_replicas == Some(3)
            && status.observed_generation == rc.metadata.generation)
            .then_some(())
    })
    .await;

    // A deleted pod is replaced.
    let victim = three[0].name_any();
    pods.delete(
        &victim,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .expect("delete");
    eventually("a replacement", || async {
        let now = active(&pods, "web").await;
        (now.len() == 3 && now.iter().all(|p| p.name_any() != victim)).then_some(())
    })
    .await;

    // Scaled down through the scale subresource, as `kubectl scale rc` does.
    rcs.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale");
    wait_for(&pods, "web", 1).await;
    eventually("status.replicas 1", || async {
        (rcs.get("web").await.ok()?.status?.replicas == 1).then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_over_a_quota_should_stop_at_it_and_say_so() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "replicationcontroller,resourcequota");
    let quotas = client.namespaced_api::<k8s_openapi::api::core::v1::ResourceQuota>(NS);
    let q =
        serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "3"}}}))
            .expect("quota");
    quotas
        .create(&PostParams::default(), &q)
        .await
        .expect("quota");
    eventually("the quota counted", || async {
        let used = quotas.get("q").await.ok()?.status?.used?;
        (used.get("pods").map(|q| q.0.as_str()) == Some("0")).then_some(())
    })
    .await;
    let rcs = client.namespaced_api::<ReplicationController>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    rcs.create(&PostParams::default(), &rc("big", 5))
        .await
        .expect("create rc");
    wait_for(&pods, "big", 3).await;
    eventually("ReplicaFailure naming the quota", || async {
        let status = rcs.get("big").await.ok()?.status?;
        let failure = status
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "ReplicaFailure")?;
        (failure.reason.as_deref() == Some("FailedCreate")
            && failure
                .message
                .as_deref()
                .is_some_and(|m| m.contains("exceeded quota: q")))
        .then_some(())
    })
    .await;
    assert_eq!(
        active(&pods, "big").await.len(),
        3,
        "never more than the quota allows"
    );
    running.stop().await;
}
