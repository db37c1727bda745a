//! The ReplicaSet loop against a real in-process API server (nothing else runs in it: pods
//! stay Pending unless a test writes their status): creating pods with the right owner and
//! labels, scaling up and down, replacing deleted pods, adopting orphans, releasing pods
//! relabelled out of the selector, and the status (ready, available after `minReadySeconds`,
//! `ReplicaFailure` when creates fail).
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::run_loops;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use setpoint_testenv::eventually;
use setpoint_testenv::TestEnv;
use tokio::time::sleep;

const NS: &str = "default";

fn labels(app: &str) -> BTreeMap<String, String> {
    [("app".to_owned(), app.to_owned())].into()
}

fn replicaset(name: &str, replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(name)),
                ..Default::default()
            },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(
                        [
                            ("app".to_owned(), name.to_owned()),
                            ("tier".to_owned(), "web".to_owned()),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                }),
                spec: Some(pod_spec()),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

fn pod_spec() -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "app".into(),
            image: Some("nginx".into()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The pods labelled `app=<app>`, by name.
async fn pods(api: &Api<Pod>, app: &str) -> Vec<Pod> {
    let mut pods = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items;
    pods.sort_by_key(ResourceExt::name_any);
    pods
}

/// Waits until exactly `n` pods are labelled `app=<app>` and returns them.
async fn wait_for_pods(api: &Api<Pod>, app: &str, n: usize) -> Vec<Pod> {
    eventually(&format!("{n} pods of {app}"), || async {
        let found = pods(api, app).await;
        (found.len() == n).then_some(found)
    })
    .await
}

async fn scale(api: &Api<ReplicaSet>, name: &str, replicas: i32) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .expect("scale");
}

fn controller_uid(pod: &Pod) -> Option<String> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// Marks `pod` Running and Ready (since now) through the status subresource, as a kubelet would.
async fn make_ready(api: &Api<Pod>, pod: &str) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    api.patch_status(
        pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }})),
    )
    .await
    .expect("patch pod status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicaset_should_create_owned_pods_and_scale_up_and_down() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "replicaset");
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let pod_api = client.namespaced_api::<Pod>(NS);
    let rs = rs_api
        .create(&PostParams::default(), &replicaset("web", 3))
        .await
        .expect("create rs");
    let rs_uid = rs.uid().expect("uid");

    let created = wait_for_pods(&pod_api, "web", 3).await;
    for pod in &created {
        assert!(pod.name_any().starts_with("web-"), "{}", pod.name_any());
        assert_eq!(pod.labels().get("tier").map(String::as_str), Some("web"));
        let owner = &pod.owner_references()[0];
        assert_eq!(pod.owner_references().len(), 1);
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str()
            ),
            ("apps/v1", "ReplicaSet", "web")
        );
        assert_eq!(owner.uid, rs_uid);
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert_eq!(pod.spec.as_ref().expect("spec").containers[0].name, "app");
    }

    scale(&rs_api, "web", 5).await;
    let five = wait_for_pods(&pod_api, "web", 5).await;
    // Make one pod Ready: scaling down must keep it and delete the Pending ones.
    let keeper = five[2].name_any();
    make_ready(&pod_api, &keeper).await;
    eventually("the RS sees the ready pod", || async {
        let rs = rs_api.get("web").await.expect("get rs");
        (rs.status?.ready_replicas == Some(1)).then_some(())
    })
    .await;
    scale(&rs_api, "web", 1).await;
    let one = wait_for_pods(&pod_api, "web", 1).await;
    assert_eq!(
        one[0].name_any(),
        keeper,
        "the ready pod outranks Pending ones"
    );

    // Stays at 1: no late, doubled create or delete.
    sleep(Duration::from_millis(700)).await;
    assert_eq!(pods(&pod_api, "web").await.len(), 1);
    let status = rs_api
        .get("web")
        .await
        .expect("get")
        .status
        .expect("status");
    assert_eq!(status.replicas, 1);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_should_be_replaced() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let _running = run_loops(&client, "replicaset");
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let pod_api = client.namespaced_api::<Pod>(NS);
    rs_api
        .create(&PostParams::default(), &replicaset("api", 2))
        .await
        .expect("create rs");
    let before = wait_for_pods(&pod_api, "api", 2).await;
    let victim = before[0].name_any();
    pod_api
        .delete(&victim, &DeleteParams::default())
        .await
        .expect("delete pod");
    let after = eventually("a replacement", || async {
        let now = pods(&pod_api, "api").await;
        (now.len() == 2 && now.iter().all(|p| p.name_any() != victim)).then_some(now)
    })
    .await;
    assert!(after.iter().any(|p| p.name_any() == before[1].name_any()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matching_orphan_should_be_adopted_instead_of_created() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let pod_api = client.namespaced_api::<Pod>(NS);
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let orphan = Pod {
        metadata: ObjectMeta {
            name: Some("orphan".into()),
            labels: Some(labels("db")),
            ..Default::default()
        },
        spec: Some(pod_spec()),
        status: None,
    };
    pod_api
        .create(&PostParams::default(), &orphan)
        .await
        .expect("create orphan");
    let _running = run_loops(&client, "replicaset");
    let rs = rs_api
        .create(&PostParams::default(), &replicaset("db", 3))
        .await
        .expect("create rs");
    let rs_uid = rs.uid().expect("uid");

    let all = wait_for_pods(&pod_api, "db", 3).await;
    assert!(all
        .iter()
        .all(|p| controller_uid(p).as_deref() == Some(rs_uid.as_str())));
    assert!(
        all.iter().any(|p| p.name_any() == "orphan"),
        "the orphan is one of the 3: only 2 were created"
    );
    sleep(Duration::from_millis(700)).await;
    assert_eq!(
        pods(&pod_api, "db").await.len(),
        3,
        "nothing created beyond 3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_relabelled_out_of_the_selector_should_be_released_and_replaced() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let _running = run_loops(&client, "replicaset");
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let pod_api = client.namespaced_api::<Pod>(NS);
    rs_api
        .create(&PostParams::default(), &replicaset("cache", 2))
        .await
        .expect("create rs");
    let before = wait_for_pods(&pod_api, "cache", 2).await;
    let moved = before[0].name_any();
    pod_api
        .patch(
            &moved,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "debugging"}}})),
        )
        .await
        .expect("relabel");

    let released = eventually("the relabelled pod released", || async {
        let pod = pod_api.get(&moved).await.expect("get");
        controller_uid(&pod).is_none().then_some(pod)
    })
    .await;
    assert!(released.owner_references().is_empty());
    let now = wait_for_pods(&pod_api, "cache", 2).await;
    assert!(
        now.iter().all(|p| p.name_any() != moved),
        "replaced by a new pod"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_should_count_ready_and_available_pods_after_min_ready_seconds() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let _running = run_loops(&client, "replicaset");
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let pod_api = client.namespaced_api::<Pod>(NS);
    let mut rs = replicaset("ui", 2);
    rs.spec.as_mut().expect("spec").min_ready_seconds = Some(2);
    rs_api
        .create(&PostParams::default(), &rs)
        .await
        .expect("create rs");
    let created = wait_for_pods(&pod_api, "ui", 2).await;

    let status = eventually("replicas counted", || async {
        let s = rs_api.get("ui").await.expect("get").status?;
        (s.replicas == 2).then_some(s)
    })
    .await;
    assert_eq!(status.fully_labeled_replicas, Some(2));
    assert_eq!(status.ready_replicas, Some(0));
    assert_eq!(status.available_replicas, Some(0));
    assert_eq!(status.observed_generation, Some(1));

    for pod in &created {
        make_ready(&pod_api, &pod.name_any()).await;
    }
    let ready = eventually("pods counted ready", || async {
        let s = rs_api.get("ui").await.expect("get").status?;
        (s.ready_replicas == Some(2)).then_some(s)
    })
    .await;
    // Both were made ready moments ago, well under the 2 s minReadySeconds.
    assert_ne!(ready.available_replicas, Some(2), "{ready:?}");
    // No pod event comes when minReadySeconds pass: the loop must look again by itself.
    eventually("pods counted available", || async {
        let s = rs_api.get("ui").await.expect("get").status?;
        (s.available_replicas == Some(2)).then_some(())
    })
    .await;

    // A pod losing its labels of the template (but still selected) is not fully labelled.
    pod_api
        .patch(
            &created[0].name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "remove", "path": "/metadata/labels/tier"}]))
                    .expect("json patch"),
            ),
        )
        .await
        .expect("unlabel");
    eventually("fullyLabeledReplicas drops", || async {
        let s = rs_api.get("ui").await.expect("get").status?;
        (s.fully_labeled_replicas == Some(1) && s.replicas == 2).then_some(())
    })
    .await;

    rs_api
        .patch(
            "ui",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale");
    eventually("observedGeneration follows", || async {
        let s = rs_api.get("ui").await.expect("get").status?;
        (s.observed_generation == Some(2)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_creates_should_set_replica_failure() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let ns_api = client.api::<Namespace>();
    ns_api
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some("doomed".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create namespace");
    let rs_api = client.namespaced_api::<ReplicaSet>("doomed");
    rs_api
        .create(&PostParams::default(), &replicaset("web", 0))
        .await
        .expect("create rs");
    // No namespace controller runs here: the namespace stays Terminating, refusing new pods.
    ns_api
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let _running = run_loops(&client, "replicaset");
    scale(&rs_api, "web", 2).await;

    let condition = eventually("ReplicaFailure set", || async {
        let s = rs_api.get("web").await.expect("get").status?;
        s.conditions?
            .into_iter()
            .find(|c| c.type_ == "ReplicaFailure")
    })
    .await;
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("FailedCreate"));
    assert!(
        condition
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("terminated"),
        "{condition:?}"
    );
    let pods = client.namespaced_api::<Pod>("doomed");
    assert!(pods
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .is_empty());

    // Scaling back to what exists clears the condition.
    scale(&rs_api, "web", 0).await;
    eventually("ReplicaFailure cleared", || async {
        let s = rs_api.get("web").await.expect("get").status?;
        let failing = s
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "ReplicaFailure");
        (!failing).then_some(())
    })
    .await;
}
