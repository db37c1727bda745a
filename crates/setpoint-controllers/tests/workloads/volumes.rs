//! PersistentVolumes and claims: binding to the smallest matching volume, the default class
//! given to class-less claims, reclaim (`Retain` → `Released`, `Delete` on a volume nobody can
//! delete → `Failed`), the local-path provisioner on the node the scheduler chose, pods kept
//! on their volume's node, and the protection finalizers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use setpoint_runtime::Client;
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops;

const NS: &str = "default";
const BINDER: &str = "persistentvolume-binder,pvc-protection,pv-protection";

async fn create_volume(client: &Client, name: &str, size: &str, spec: Value) -> PersistentVolume {
    let mut full = json!({
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "manual",
        "persistentVolumeReclaimPolicy": "Retain",
        "hostPath": {"path": format!("/tmp/setpoint-test-{name}")},
    });
    if let (Some(f), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
        f.extend(extra.clone());
    }
    let volume: PersistentVolume =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": full})).expect("volume");
    client
        .api::<PersistentVolume>()
        .create(&PostParams::default(), &volume)
        .await
        .expect("create volume")
}

async fn create_claim(
    client: &Client,
    name: &str,
    spec: Value,
    annotations: Value,
) -> PersistentVolumeClaim {
    let mut full = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    });
    if let (Some(f), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
        f.extend(extra.clone());
    }
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations}, "spec": full
    }))
    .expect("claim");
    client
        .namespaced_api::<PersistentVolumeClaim>(NS)
        .create(&PostParams::default(), &claim)
        .await
        .expect("create claim")
}

fn claim_phase(c: &PersistentVolumeClaim) -> Option<&str> {
    c.status.as_ref()?.phase.as_deref()
}

fn volume_phase(v: &PersistentVolume) -> Option<&str> {
    v.status.as_ref()?.phase.as_deref()
}

async fn wait_claim(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&PersistentVolumeClaim) -> bool,
) -> PersistentVolumeClaim {
    let api = client.namespaced_api::<PersistentVolumeClaim>(NS);
    eventually(&format!("claim {name}: {what}"), || async {
        api.get_opt(name)
            .await
            .expect("get claim")
            .filter(|c| check(c))
    })
    .await
}

async fn wait_volume(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&PersistentVolume) -> bool,
) -> PersistentVolume {
    let api = client.api::<PersistentVolume>();
    eventually(&format!("volume {name}: {what}"), || async {
        api.get_opt(name)
            .await
            .expect("get volume")
            .filter(|v| check(v))
    })
    .await
}

async fn wait_claim_gone(client: &Client, name: &str) {
    let api = client.namespaced_api::<PersistentVolumeClaim>(NS);
    eventually(&format!("claim {name} gone"), || async {
        api.get_opt(name).await.expect("get claim").is_none()
    })
    .await;
}

async fn add_ready_node(client: &Client, name: &str, annotations: Value) {
    let api = client.api::<Node>();
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "annotations": annotations},
    }))
    .expect("node");
    api.create(&PostParams::default(), &node)
        .await
        .expect("create node");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        }})),
    )
    .await
    .expect("node status");
}

async fn create_pod_with_claim(client: &Client, name: &str, claim: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "app", "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        }
    }))
    .expect("pod");
    client
        .namespaced_api::<Pod>(NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binder_should_bind_the_smallest_matching_volume_and_release_it_with_its_claim() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let _running = run_loops(&client, BINDER);
    create_volume(&client, "big", "10Gi", json!({})).await;
    create_volume(&client, "small", "2Gi", json!({})).await;
    create_volume(&client, "tiny", "500Mi", json!({})).await;
    create_volume(
        &client,
        "rwx",
        "1Gi",
        json!({"accessModes": ["ReadWriteMany"]}),
    )
    .await;
    wait_volume(&client, "big", "Available", |v| {
        volume_phase(v) == Some("Available")
    })
    .await;

    create_claim(
        &client,
        "data",
        json!({"storageClassName": "manual"}),
        json!({}),
    )
    .await;
    let claim = wait_claim(&client, "data", "Bound", |c| {
        claim_phase(c) == Some("Bound")
    })
    .await;
    assert_eq!(
        claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("small")
    );
    let annotations = claim.annotations();
    assert_eq!(
        annotations
            .get("pv.kubernetes.io/bind-completed")
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(
        annotations
            .get("pv.kubernetes.io/bound-by-controller")
            .map(String::as_str),
        Some("yes")
    );
    let capacity = claim
        .status
        .as_ref()
        .and_then(|s| s.capacity.clone())
        .unwrap_or_default();
    assert_eq!(capacity.get("storage").map(|q| q.0.as_str()), Some("2Gi"));
    assert!(claim
        .finalizers()
        .iter()
        .any(|f| f == "kubernetes.io/pvc-protection"));

    let volume = wait_volume(&client, "small", "Bound", |v| {
        volume_phase(v) == Some("Bound")
    })
    .await;
    let claim_ref = volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.clone())
        .expect("claimRef");
    assert_eq!(claim_ref.name.as_deref(), Some("data"));
    assert_eq!(claim_ref.uid, claim.metadata.uid);
    assert!(volume
        .finalizers()
        .iter()
        .any(|f| f == "kubernetes.io/pv-protection"));
    // The others stay available.
    let big = client
        .api::<PersistentVolume>()
        .get("big")
        .await
        .expect("big");
    assert_eq!(volume_phase(&big), Some("Available"));

    client
        .namespaced_api::<PersistentVolumeClaim>(NS)
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_claim_gone(&client, "data").await;
    wait_volume(&client, "small", "Released (Retain)", |v| {
        volume_phase(v) == Some("Released")
    })
    .await;
    // A Released volume is not bound again.
    create_claim(
        &client,
        "again",
        json!({"storageClassName": "manual", "resources": {"requests": {"storage": "2Gi"}}}),
        json!({}),
    )
    .await;
    let again = wait_claim(&client, "again", "Bound", |c| {
        claim_phase(c) == Some("Bound")
    })
    .await;
    assert_eq!(
        again.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("big")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binder_should_honour_prebinding_selectors_and_mark_undeletable_volumes_failed() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let _running = run_loops(&client, BINDER);
    create_volume(&client, "gold", "5Gi", json!({})).await;
    create_volume(
        &client,
        "plain",
        "1Gi",
        json!({"persistentVolumeReclaimPolicy": "Delete"}),
    )
    .await;
    // Labels can only be set on creation through the metadata; patch them on.
    client
        .api::<PersistentVolume>()
        .patch(
            "gold",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "gold"}}})),
        )
        .await
        .expect("label gold");

    create_claim(
        &client,
        "picky",
        json!({"storageClassName": "manual", "selector": {"matchLabels": {"tier": "gold"}}}),
        json!({}),
    )
    .await;
    let picky = wait_claim(&client, "picky", "Bound", |c| {
        claim_phase(c) == Some("Bound")
    })
    .await;
    assert_eq!(
        picky.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("gold")
    );

    create_claim(
        &client,
        "named",
        json!({"storageClassName": "manual", "volumeName": "plain"}),
        json!({}),
    )
    .await;
    let named = wait_claim(&client, "named", "Bound", |c| {
        claim_phase(c) == Some("Bound")
    })
    .await;
    assert!(
        !named
            .annotations()
            .contains_key("pv.kubernetes.io/bound-by-controller"),
        "a claim the user bound through volumeName is not marked bound by the controller"
    );
    let plain = wait_volume(&client, "plain", "Bound", |v| {
        volume_phase(v) == Some("Bound")
    })
    .await;
    assert_eq!(
        plain
            .annotations()
            .get("pv.kubernetes.io/bound-by-controller")
            .map(String::as_str),
        Some("yes"),
        "the controller set the volume's claimRef"
    );

    client
        .namespaced_api::<PersistentVolumeClaim>(NS)
        .delete("named", &DeleteParams::default())
        .await
        .expect("delete claim");
    let failed = wait_volume(&client, "plain", "Failed", |v| {
        volume_phase(v) == Some("Failed")
    })
    .await;
    let message = failed.status.and_then(|s| s.message).unwrap_or_default();
    assert!(message.contains("no deleter"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn class_less_claim_should_get_the_default_class_and_wait_for_a_consumer() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let _running = run_loops(&client, &format!("{BINDER},local-path-provisioner"));
    create_claim(&client, "plain", json!({}), json!({})).await;
    let claim = wait_claim(&client, "plain", "the default class", |c| {
        c.spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref())
            == Some("standard")
    })
    .await;
    assert_eq!(claim_phase(&claim), Some("Pending"));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let volumes = client
        .api::<PersistentVolume>()
        .list(&Default::default())
        .await
        .expect("volumes");
    assert!(
        volumes.items.is_empty(),
        "nothing is provisioned before a node is chosen"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_should_choose_a_node_for_the_claim_and_keep_its_pods_there() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let _running = run_loops(
        &client,
        &format!("{BINDER},local-path-provisioner,scheduler"),
    );
    for n in ["n1", "n2", "n3"] {
        add_ready_node(
            &client,
            n,
            json!({"setpoint.dev/local-path-root": format!("/srv/{n}")}),
        )
        .await;
    }
    create_claim(
        &client,
        "data",
        json!({"storageClassName": "standard"}),
        json!({}),
    )
    .await;
    create_pod_with_claim(&client, "first", "data").await;
    let pods = client.namespaced_api::<Pod>(NS);
    let node_of = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    let first = eventually("the first pod bound", || async {
        pods.get("first")
            .await
            .ok()
            .filter(|p| node_of(p).is_some())
    })
    .await;
    let node = node_of(&first).expect("node");
    let claim = wait_claim(&client, "data", "Bound", |c| {
        claim_phase(c) == Some("Bound")
    })
    .await;
    assert_eq!(
        claim
            .annotations()
            .get("volume.kubernetes.io/selected-node"),
        Some(&node)
    );
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .expect("volume");
    assert_eq!(volume_name, format!("pvc-{}", claim.uid().expect("uid")));
    let volume = client
        .api::<PersistentVolume>()
        .get(&volume_name)
        .await
        .expect("volume");
    let spec = volume.spec.clone().expect("spec");
    let path = spec.local.map(|l| l.path).unwrap_or_default();
    assert!(path.starts_with(&format!("/srv/{node}/pvc-")), "{path}");
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    let affinity = serde_json::to_value(&spec.node_affinity).expect("json");
    assert_eq!(
        affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
        json!([node])
    );
    assert!(volume
        .finalizers()
        .iter()
        .any(|f| f == "setpoint.dev/local-path-cleanup"));

    // Every later pod of the claim goes to the volume's node.
    for i in 0..6 {
        create_pod_with_claim(&client, &format!("later-{i}"), "data").await;
    }
    let mut placed = BTreeMap::new();
    for i in 0..6 {
        let name = format!("later-{i}");
        let pod = eventually(&format!("{name} bound"), || async {
            pods.get(&name).await.ok().filter(|p| node_of(p).is_some())
        })
        .await;
        *placed.entry(node_of(&pod).expect("node")).or_insert(0) += 1;
    }
    assert_eq!(placed, BTreeMap::from([(node.clone(), 6)]));

    // A pod whose claim does not exist is unschedulable.
    create_pod_with_claim(&client, "orphan", "missing").await;
    let orphan = eventually("the orphan reported unschedulable", || async {
        pods.get("orphan").await.ok().filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "PodScheduled" && c.status == "False")
                })
        })
    })
    .await;
    let message = orphan
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| c.message)
        .unwrap_or_default();
    assert!(
        message.contains("persistentvolumeclaim \"missing\" not found"),
        "{message}"
    );

    // Claim deleted while pods use it: kept; pods gone: the claim goes, the volume is
    // released and deleted, and waits for its node's agent (the cleanup finalizer).
    client
        .namespaced_api::<PersistentVolumeClaim>(NS)
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete claim");
    let kept = wait_claim(&client, "data", "terminating", |c| {
        c.metadata.deletion_timestamp.is_some()
    })
    .await;
    assert!(kept
        .finalizers()
        .iter()
        .any(|f| f == "kubernetes.io/pvc-protection"));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(client
        .namespaced_api::<PersistentVolumeClaim>(NS)
        .get_opt("data")
        .await
        .expect("get")
        .is_some());
    for name in [
        "first", "later-0", "later-1", "later-2", "later-3", "later-4", "later-5",
    ] {
        pods.delete(
            name,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .expect("delete pod");
    }
    wait_claim_gone(&client, "data").await;
    let deleting = wait_volume(
        &client,
        &volume_name,
        "deleted, released, waiting for the agent only",
        |v| {
            v.metadata.deletion_timestamp.is_some()
                && v.finalizers() == ["setpoint.dev/local-path-cleanup".to_owned()]
        },
    )
    .await;
    assert_eq!(
        deleting.finalizers(),
        &["setpoint.dev/local-path-cleanup".to_owned()]
    );
    assert_eq!(volume_phase(&deleting), Some("Released"));
    // What the node's agent does once the directory is gone.
    client
        .api::<PersistentVolume>()
        .patch(
            &volume_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("remove the finalizer");
    let volumes: Api<PersistentVolume> = client.api();
    eventually("the volume gone", || async {
        volumes.get_opt(&volume_name).await.expect("get").is_none()
    })
    .await;
}
