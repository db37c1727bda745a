//! The StatefulSet loop: ordered creation and claims, a deleted pod recreated under its name
//! with its claim, ordered scale-down with claims handed to their pods (`whenScaled: Delete`),
//! `Parallel` creation, a rolling update held by a partition then finished, a rollback that
//! renumbers the old ControllerRevision, failed pods replaced, and the status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use setpoint_testenv::{eventually, TestEnv};
use tokio::time::sleep;

use crate::common::run_loops;
use crate::workloads::sets_kit::{image_of, label, live_pods, mark_ready, Kubelet, NS};

/// A StatefulSet `name` of `replicas` pods of `image` (labelled `app=<name>`), with one claim
/// template `data` and `extra` merged into its spec.
fn statefulset(name: &str, replicas: i32, image: &str, extra: serde_json::Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": replicas,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": image}]},
        },
        "volumeClaimTemplates": [{
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("statefulset")
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter().map(ResourceExt::name_any).collect()
}

async fn wait_for_names(api: &Api<Pod>, app: &str, wanted: &[&str]) -> Vec<Pod> {
    eventually(&format!("pods {wanted:?}"), || async {
        let pods = live_pods(api, app).await;
        (names(&pods) == wanted).then_some(pods)
    })
    .await
}

async fn status(
    api: &Api<StatefulSet>,
    name: &str,
) -> k8s_openapi::api::apps::v1::StatefulSetStatus {
    api.get(name).await.expect("get").status.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_should_create_in_order_with_claims_and_recreate_a_deleted_pod() {
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let loops = run_loops(&client, "statefulset");
    let sets = client.namespaced_api::<StatefulSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let claims = client.namespaced_api::<PersistentVolumeClaim>(NS);
    sets.create(
        &PostParams::default(),
        &statefulset("web", 3, "nginx:1", json!({})),
    )
    .await
    .expect("create");

    // Only web-0 until it is running and ready.
    let first = wait_for_names(&pods, "web", &["web-0"]).await;
    let claim = claims
        .get("data-web-0")
        .await
        .expect("claim made with the pod");
    assert_eq!(claim.labels()["app"], "web");
    let pod = &first[0];
    assert_eq!(label(pod, "statefulset.kubernetes.io/pod-name"), "web-0");
    assert_eq!(label(pod, "apps.kubernetes.io/pod-index"), "0");
    let spec = pod.spec.clone().expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("web"));
    let volume = spec.volumes.expect("volumes");
    assert_eq!(
        volume[0]
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.clone()),
        Some("data-web-0".to_owned())
    );
    sleep(Duration::from_millis(500)).await;
    assert_eq!(
        names(&live_pods(&pods, "web").await),
        ["web-0"],
        "web-1 waits for web-0"
    );

    mark_ready(&pods, "web-0").await.expect("ready");
    wait_for_names(&pods, "web", &["web-0", "web-1"]).await;
    sleep(Duration::from_millis(300)).await;
    assert_eq!(names(&live_pods(&pods, "web").await), ["web-0", "web-1"]);
    mark_ready(&pods, "web-1").await.expect("ready");
    wait_for_names(&pods, "web", &["web-0", "web-1", "web-2"]).await;
    mark_ready(&pods, "web-2").await.expect("ready");
    eventually("status: 3 ready, one revision", || async {
        let s = status(&sets, "web").await;
        (s.ready_replicas == Some(3)
            && s.replicas == 3
            && s.current_revision.is_some()
            && s.current_revision == s.update_revision
            && s.updated_replicas == Some(3))
        .then_some(())
    })
    .await;

    // A deleted pod comes back under its name, with its claim.
    let old_uid = pods.get("web-1").await.expect("web-1").uid();
    pods.delete("web-1", &DeleteParams::default())
        .await
        .expect("delete");
    let back = eventually("web-1 recreated", || async {
        pods.get_opt("web-1")
            .await
            .ok()
            .flatten()
            .filter(|p| p.uid() != old_uid && p.metadata.deletion_timestamp.is_none())
    })
    .await;
    let claims_of = |p: &Pod| {
        p.spec.as_ref().and_then(|s| s.volumes.as_ref()).map(|v| {
            v.iter()
                .filter_map(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .map(|c| c.claim_name.clone())
                })
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(claims_of(&back), Some(vec!["data-web-1".to_owned()]));
    let all: Vec<String> = claims
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(
        all,
        ["data-web-0", "data-web-1", "data-web-2"],
        "no claim made twice"
    );
    loops.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_should_go_from_the_highest_ordinal_and_hand_claims_to_their_pods() {
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let loops = run_loops(&client, "statefulset");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(100), false);
    let sets = client.namespaced_api::<StatefulSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let claims = client.namespaced_api::<PersistentVolumeClaim>(NS);
    let policy = json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"}});
    sets.create(
        &PostParams::default(),
        &statefulset("db", 3, "pg:1", policy),
    )
    .await
    .expect("create");
    wait_for_names(&pods, "db", &["db-0", "db-1", "db-2"]).await;
    let owner_kinds = |c: &PersistentVolumeClaim| -> Vec<String> {
        c.owner_references()
            .iter()
            .map(|r| r.kind.clone())
            .collect()
    };
    let kept = eventually("claim owned by the set", || async {
        claims
            .get("data-db-0")
            .await
            .ok()
            .filter(|c| owner_kinds(c) == ["StatefulSet"])
    })
    .await;
    assert_eq!(kept.owner_references()[0].name, "db");

    // Watch the scale-down: db-1 must never go while db-2 is still there.
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale");
    eventually("scaled to db-0", || async {
        let present: Vec<String> = pods
            .list(&ListParams::default().labels("app=db"))
            .await
            .expect("list")
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        assert!(
            !present.contains(&"db-2".to_owned()) || present.contains(&"db-1".to_owned()),
            "db-1 went before db-2: {present:?}"
        );
        (present == ["db-0"]).then_some(())
    })
    .await;
    // The condemned pods' claims were handed to them (the garbage collector, not running
    // here, would delete them with the pods); db-0's stays with the set.
    for claim in ["data-db-1", "data-db-2"] {
        let c = claims.get(claim).await.expect("claim");
        assert_eq!(owner_kinds(&c), ["Pod"], "{claim}");
    }
    assert_eq!(
        owner_kinds(&claims.get("data-db-0").await.expect("claim")),
        ["StatefulSet"]
    );
    loops.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_rolling_update_should_move_only_ordinals_at_or_above_the_partition_then_undo()
{
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let loops = run_loops(&client, "statefulset");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(50), false);
    let sets = client.namespaced_api::<StatefulSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let revisions = client.namespaced_api::<ControllerRevision>(NS);
    let extra = json!({
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
    });
    sets.create(
        &PostParams::default(),
        &statefulset("web", 4, "nginx:1", extra),
    )
    .await
    .expect("create");
    eventually("4 ready", || async {
        (status(&sets, "web").await.ready_replicas == Some(4)).then_some(())
    })
    .await;
    let first = status(&sets, "web")
        .await
        .update_revision
        .expect("revision");

    let image = |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Strategic(image("nginx:2")),
    )
    .await
    .expect("update");
    let images = eventually("ordinals 2 and 3 updated", || async {
        let pods = live_pods(&pods, "web").await;
        let images: BTreeMap<String, String> =
            pods.iter().map(|p| (p.name_any(), image_of(p))).collect();
        let ready = pods
            .iter()
            .filter(|p| crate::workloads::sets_kit::is_ready(p))
            .count();
        (images.get("web-2").map(String::as_str) == Some("nginx:2")
            && images.get("web-3").map(String::as_str) == Some("nginx:2")
            && ready == 4)
            .then_some(images)
    })
    .await;
    sleep(Duration::from_millis(500)).await;
    assert_eq!(images["web-0"], "nginx:1");
    assert_eq!(images["web-1"], "nginx:1");
    let live = live_pods(&pods, "web").await;
    assert_eq!(image_of(&live[0]), "nginx:1", "below the partition stays");
    assert_eq!(image_of(&live[1]), "nginx:1", "below the partition stays");
    let s = eventually("status counts the partial update", || async {
        let s = status(&sets, "web").await;
        (s.updated_replicas == Some(2) && s.current_replicas == Some(2)).then_some(s)
    })
    .await;
    assert_eq!(s.current_revision.as_deref(), Some(first.as_str()));
    assert_ne!(s.update_revision, s.current_revision);

    // Partition 0: everything moves, and the update revision becomes current.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
    )
    .await
    .expect("partition 0");
    let s = eventually("rolled", || async {
        let s = status(&sets, "web").await;
        (s.updated_replicas == Some(4)
            && s.ready_replicas == Some(4)
            && s.current_revision == s.update_revision)
            .then_some(s)
    })
    .await;
    let second = s.update_revision.expect("revision");
    assert!(live_pods(&pods, "web")
        .await
        .iter()
        .all(|p| image_of(p) == "nginx:2"));

    // Back to the first template: its revision is renumbered, not duplicated.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Strategic(image("nginx:1")),
    )
    .await
    .expect("undo");
    eventually("rolled back", || async {
        let s = status(&sets, "web").await;
        (s.update_revision.as_deref() == Some(first.as_str())
            && s.current_revision == s.update_revision
            && s.updated_replicas == Some(4))
        .then_some(())
    })
    .await;
    let history = revisions
        .list(&ListParams::default())
        .await
        .expect("revisions")
        .items;
    let mut numbered: Vec<(String, i64)> =
        history.iter().map(|r| (r.name_any(), r.revision)).collect();
    numbered.sort_by_key(|(_, n)| *n);
    assert_eq!(numbered, [(second, 2), (first, 3)]);
    loops.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_should_create_every_pod_at_once_and_replace_failed_ones() {
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let loops = run_loops(&client, "statefulset");
    let sets = client.namespaced_api::<StatefulSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let extra = json!({"podManagementPolicy": "Parallel", "ordinals": {"start": 5}});
    sets.create(&PostParams::default(), &statefulset("par", 3, "x:1", extra))
        .await
        .expect("create");
    // Nothing is ready, yet all three exist: Parallel does not wait.
    wait_for_names(&pods, "par", &["par-5", "par-6", "par-7"]).await;

    let old_uid = pods.get("par-6").await.expect("par-6").uid();
    pods.patch_status(
        "par-6",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .expect("fail");
    eventually("par-6 replaced", || async {
        pods.get_opt("par-6")
            .await
            .ok()
            .flatten()
            .filter(|p| p.uid() != old_uid && crate::workloads::sets_kit::phase(p) != "Failed")
    })
    .await;
    loops.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_should_update_only_deleted_pods_and_history_should_be_truncated() {
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let loops = run_loops(&client, "statefulset");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(50), false);
    let sets = client.namespaced_api::<StatefulSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let revisions = client.namespaced_api::<ControllerRevision>(NS);
    let extra = json!({
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "OnDelete"},
        "revisionHistoryLimit": 1,
    });
    sets.create(&PostParams::default(), &statefulset("od", 2, "v:1", extra))
        .await
        .expect("create");
    eventually("2 ready", || async {
        (status(&sets, "od").await.ready_replicas == Some(2)).then_some(())
    })
    .await;
    let image = |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    for v in ["v:2", "v:3", "v:4"] {
        sets.patch("od", &PatchParams::default(), &Patch::Strategic(image(v)))
            .await
            .expect("update");
        eventually(&format!("update revision for {v}"), || async {
            let s = status(&sets, "od").await;
            let generation = sets.get("od").await.ok()?.metadata.generation;
            (s.observed_generation == generation).then_some(())
        })
        .await;
    }
    sleep(Duration::from_millis(500)).await;
    assert!(
        live_pods(&pods, "od")
            .await
            .iter()
            .all(|p| image_of(p) == "v:1"),
        "OnDelete: nothing moves by itself"
    );
    // Kept: the current revision (v:1, still run by both pods), the update revision (v:4) and
    // one more (the limit); the oldest unused one (v:2) is gone.
    let kept = eventually("history truncated to the limit", || async {
        let items = revisions.list(&ListParams::default()).await.ok()?.items;
        (items.len() == 3).then_some(items)
    })
    .await;
    let mut numbers: Vec<i64> = kept.iter().map(|r| r.revision).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [1, 3, 4]);

    pods.delete("od-1", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("od-1 recreated on v:4", || async {
        let pods = live_pods(&pods, "od").await;
        let images: Vec<String> = pods.iter().map(image_of).collect();
        (images == ["v:1", "v:4"]).then_some(())
    })
    .await;
    let s = eventually("status counts one updated pod", || async {
        let s = status(&sets, "od").await;
        (s.updated_replicas == Some(1) && s.current_replicas == Some(1)).then_some(s)
    })
    .await;
    assert_ne!(s.current_revision, s.update_revision);
    loops.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_ready_seconds_should_hold_availability_and_the_next_ordinal() {
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let loops = run_loops(&client, "statefulset");
    let sets = client.namespaced_api::<StatefulSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    sets.create(
        &PostParams::default(),
        &statefulset("slow", 2, "x:1", json!({"minReadySeconds": 2})),
    )
    .await
    .expect("create");
    wait_for_names(&pods, "slow", &["slow-0"]).await;
    mark_ready(&pods, "slow-0").await.expect("ready");
    let s = eventually("ready but not yet available", || async {
        let s = status(&sets, "slow").await;
        (s.ready_replicas == Some(1)).then_some(s)
    })
    .await;
    assert_eq!(s.available_replicas, Some(0), "ready for less than 2 s");
    assert_eq!(
        names(&live_pods(&pods, "slow").await),
        ["slow-0"],
        "slow-1 waits for slow-0 to be available"
    );
    // The loop requeues itself for the moment slow-0 becomes available, then goes on.
    wait_for_names(&pods, "slow", &["slow-0", "slow-1"]).await;
    eventually("slow-0 counted available", || async {
        (status(&sets, "slow").await.available_replicas == Some(1)).then_some(())
    })
    .await;
    loops.stop().await;
}
