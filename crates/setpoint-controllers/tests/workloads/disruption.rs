//! The disruption loop: a PodDisruptionBudget's status from its pods (counts, percentages of
//! the controllers' scale, `maxUnavailable`, the generation it saw, the `DisruptionAllowed`
//! condition), eviction records that expire, stale `DisruptionTarget` conditions cleared, and
//! the eviction API spending what the loop allows (429 once spent).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops;

const NS: &str = "default";

fn pod(name: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("pod")
}

/// Marks `pod` Running and Ready (or not), as a kubelet would.
async fn set_ready(api: &Api<Pod>, pod: &str, ready: bool) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    api.patch_status(
        pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": now}],
        }})),
    )
    .await
    .expect("patch pod status");
}

fn budget(name: &str, app: &str, bound: (&str, Value)) -> PodDisruptionBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": app}}});
    spec[bound.0] = bound.1;
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pdb")
}

/// The budget's status once `check` accepts it.
async fn status_where(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || async {
        let pdb = api.get(name).await.ok()?;
        let v = serde_json::to_value(&pdb).ok()?;
        check(&v["status"]).then(|| v["status"].clone())
    })
    .await
}

fn condition(status: &Value) -> (String, String) {
    let c = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionAllowed"))
        .cloned()
        .unwrap_or_default();
    (
        c["status"].as_str().unwrap_or_default().to_owned(),
        c["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_should_allow_the_healthy_pods_beyond_its_minimum() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "disruption");
    let pods = client.namespaced_api::<Pod>(NS);
    let pdbs = client.namespaced_api::<PodDisruptionBudget>(NS);
    for name in ["a-0", "a-1", "a-2"] {
        pods.create(&PostParams::default(), &pod(name, "a"))
            .await
            .expect("pod");
    }
    set_ready(&pods, "a-0", true).await;
    set_ready(&pods, "a-1", true).await;
    pdbs.create(
        &PostParams::default(),
        &budget("a", "a", ("minAvailable", json!(1))),
    )
    .await
    .expect("pdb");
    let status = status_where(&pdbs, "a", "2 healthy of 3, 1 allowed", |s| {
        s["currentHealthy"] == 2 && s["expectedPods"] == 3 && s["disruptionsAllowed"] == 1
    })
    .await;
    assert_eq!(status["desiredHealthy"], 1, "{status}");
    assert_eq!(status["observedGeneration"], 1, "{status}");
    assert_eq!(condition(&status), ("True".into(), "SufficientPods".into()));

    set_ready(&pods, "a-2", true).await;
    status_where(&pdbs, "a", "3 healthy, 2 allowed", |s| {
        s["disruptionsAllowed"] == 2
    })
    .await;

    // A stricter spec: nothing may go, and the status says which generation it reflects.
    pdbs.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 3}})),
    )
    .await
    .expect("patch pdb");
    let status = status_where(&pdbs, "a", "generation 2 seen", |s| {
        s["observedGeneration"] == 2
    })
    .await;
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");
    assert_eq!(
        condition(&status),
        ("False".into(), "InsufficientPods".into())
    );

    // An empty selector selects every pod of the namespace (policy/v1).
    let all: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "all"}, "spec": {"selector": {}, "maxUnavailable": 0}}))
    .expect("pdb");
    pods.create(&PostParams::default(), &pod("b-0", "b"))
        .await
        .expect("pod");
    pdbs.create(&PostParams::default(), &all)
        .await
        .expect("pdb");
    let status = status_where(&pdbs, "all", "every pod counted", |s| {
        s["currentHealthy"] == 3
    })
    .await;
    // maxUnavailable needs controllers; bare pods have none, so nothing is expected.
    assert_eq!(status["expectedPods"], 0, "{status}");
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");
    // ... and the budget says so in an Event.
    let events = client.namespaced_api::<k8s_openapi::api::events::v1::Event>(NS);
    eventually("an UnmanagedPods event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("UnmanagedPods")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("all")
            })
            .then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percentages_should_be_taken_of_the_controllers_scale() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "disruption,replicaset");
    let pods = client.namespaced_api::<Pod>(NS);
    let pdbs = client.namespaced_api::<PodDisruptionBudget>(NS);
    let replicasets = client.namespaced_api::<ReplicaSet>(NS);
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }))
    .expect("rs");
    replicasets
        .create(&PostParams::default(), &rs)
        .await
        .expect("rs");
    let names = eventually("4 pods", || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?;
        (list.items.len() == 4).then(|| {
            list.items
                .iter()
                .map(ResourceExt::name_any)
                .collect::<Vec<_>>()
        })
    })
    .await;
    for name in &names[..3] {
        set_ready(&pods, name, true).await;
    }
    pdbs.create(
        &PostParams::default(),
        &budget("half", "web", ("minAvailable", json!("50%"))),
    )
    .await
    .expect("pdb");
    let status = status_where(&pdbs, "half", "3 healthy of 4, 2 desired", |s| {
        s["currentHealthy"] == 3 && s["disruptionsAllowed"] == 1
    })
    .await;
    assert_eq!(
        (
            status["expectedPods"].clone(),
            status["desiredHealthy"].clone()
        ),
        (json!(4), json!(2))
    );

    // maxUnavailable of the scale: 6 replicas, 25% → 2 may be down, 4 must stay.
    pdbs.create(
        &PostParams::default(),
        &budget("quarter", "web", ("maxUnavailable", json!("25%"))),
    )
    .await
    .expect("pdb");
    replicasets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 6}})),
        )
        .await
        .expect("scale");
    let status = status_where(&pdbs, "quarter", "6 expected", |s| s["expectedPods"] == 6).await;
    assert_eq!(status["desiredHealthy"], 4, "{status}");
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_should_spend_the_budget_and_records_should_expire() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "disruption");
    let pods = client.namespaced_api::<Pod>(NS);
    let pdbs = client.namespaced_api::<PodDisruptionBudget>(NS);
    for name in ["e-0", "e-1", "e-2"] {
        pods.create(&PostParams::default(), &pod(name, "e"))
            .await
            .expect("pod");
        // Bound to a node, so a delete waits for the (absent) kubelet.
        pods.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "n1"}})),
        )
        .await
        .ok();
        set_ready(&pods, name, true).await;
    }
    pdbs.create(
        &PostParams::default(),
        &budget("e", "e", ("minAvailable", json!(2))),
    )
    .await
    .expect("pdb");
    status_where(&pdbs, "e", "1 allowed", |s| s["disruptionsAllowed"] == 1).await;

    pods.evict("e-0", &EvictParams::default())
        .await
        .expect("first eviction allowed");
    let refused = pods
        .evict("e-1", &EvictParams::default())
        .await
        .expect_err("budget spent");
    match refused {
        kube::Error::Api(e) => {
            assert_eq!(e.code, 429, "{e:?}");
            assert_eq!(
                e.message,
                "Cannot evict pod as it would violate the pod's disruption budget."
            );
        }
        other => panic!("not a 429: {other:?}"),
    }
    // The loop drops the record once the pod is terminating; 1 of 3 is going, so none may go.
    let status = status_where(&pdbs, "e", "the evicted pod no longer counted", |s| {
        s["currentHealthy"] == 2 && s["disruptedPods"].is_null()
    })
    .await;
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");

    // A record of an eviction that never happened expires after two minutes (written here as
    // three minutes old), and the pod counts again.
    let mut pdb = pdbs.get_status("e").await.expect("pdb");
    let old = k8s_openapi::jiff::Timestamp::now()
        .checked_sub(std::time::Duration::from_secs(180))
        .expect("time");
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disrupted_pods = Some(BTreeMap::from([(
        "e-1".to_owned(),
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(old),
    )]));
    pdb.status = Some(status);
    pdbs.replace_status("e", &PostParams::default(), &pdb)
        .await
        .expect("record");
    status_where(&pdbs, "e", "the stale record dropped", |s| {
        s["disruptedPods"].is_null() && s["currentHealthy"] == 2
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_disruption_target_should_be_cleared() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "disruption");
    let pods = client.namespaced_api::<Pod>(NS);
    pods.create(&PostParams::default(), &pod("s-0", "s"))
        .await
        .expect("pod");
    pods.create(&PostParams::default(), &pod("s-1", "s"))
        .await
        .expect("pod");
    let old = k8s_openapi::jiff::Timestamp::now()
        .checked_sub(std::time::Duration::from_secs(180))
        .expect("time")
        .to_string();
    let fresh = k8s_openapi::jiff::Timestamp::now().to_string();
    for (name, since) in [("s-0", &old), ("s-1", &fresh)] {
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                 "lastTransitionTime": since}]}})),
        )
        .await
        .expect("mark");
    }
    let target = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
            .map(|c| c.status.clone())
    };
    eventually("s-0's condition cleared", || async {
        let p = pods.get("s-0").await.ok()?;
        (target(&p).as_deref() == Some("False")).then_some(())
    })
    .await;
    // The fresh one is not stale yet.
    let p = pods.get("s-1").await.expect("pod");
    assert_eq!(target(&p).as_deref(), Some("True"));
    running.stop().await;
}

/// Creates `kind` `name` (apiVersion `api_version`, resource `plural`) with `replicas`, and a
/// ready pod labelled `app=mix` that it controls.
async fn owned_pod(
    client: &setpoint_runtime::Client,
    resource: &kube::api::ApiResource,
    name: &str,
    body: Value,
) {
    let api = client.dynamic_api(resource, Some(NS));
    let object: kube::api::DynamicObject = serde_json::from_value(body).expect("object");
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .expect("owner");
    let uid = created.metadata.uid.clone().expect("uid");
    let pods = client.namespaced_api::<Pod>(NS);
    let mut p = serde_json::to_value(pod(&format!("{name}-0"), "mix")).expect("pod");
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": resource.api_version, "kind": resource.kind,
        "name": name, "uid": uid, "controller": true}]);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(p).expect("pod"),
    )
    .await
    .expect("pod");
    set_ready(&pods, &format!("{name}-0"), true).await;
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_controller_should_count_with_its_scale() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    // Only the disruption loop: the owners below make no pods of their own.
    let running = run_loops(&client, "disruption");
    let crd = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "fleets.pdb.setpoint.dev"},
        "spec": {
            "group": "pdb.setpoint.dev",
            "scope": "Namespaced",
            "names": {"plural": "fleets", "singular": "fleet", "kind": "Fleet"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"scale": {"specReplicasPath": ".spec.replicas",
                                           "statusReplicasPath": ".status.replicas"}}
            }]
        }
    }))
    .expect("CRD");
    setpoint_runtime::install_crd(&client, &crd, std::time::Duration::from_secs(30))
        .await
        .expect("CRD established");
    let template = json!({"metadata": {"labels": {"app": "mix"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let selector = json!({"matchLabels": {"app": "mix"}});
    owned_pod(
        &client,
        &resource("apps", "v1", "StatefulSet", "statefulsets"),
        "ss",
        json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ss"},
        "spec": {"replicas": 3, "serviceName": "ss", "selector": selector, "template": template}}),
    )
    .await;
    owned_pod(
        &client,
        &resource("", "v1", "ReplicationController", "replicationcontrollers"),
        "rc",
        json!({
        "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
        "spec": {"replicas": 2, "selector": {"app": "mix"}, "template": template}}),
    )
    .await;
    owned_pod(
        &client,
        &resource("pdb.setpoint.dev", "v1", "Fleet", "fleets"),
        "fleet",
        json!({
        "apiVersion": "pdb.setpoint.dev/v1", "kind": "Fleet", "metadata": {"name": "fleet"},
        "spec": {"replicas": 5}}),
    )
    .await;
    // A Deployment's ReplicaSet counts as the Deployment (4, not the ReplicaSet's 1).
    let deployments = client.namespaced_api::<k8s_openapi::api::apps::v1::Deployment>(NS);
    let dep = deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "dep"},
                "spec": {"replicas": 4, "selector": selector, "template": template}}))
            .expect("deployment"),
        )
        .await
        .expect("deployment");
    owned_pod(
        &client,
        &resource("apps", "v1", "ReplicaSet", "replicasets"),
        "dep-1",
        json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "dep-1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep",
                                 "uid": dep.metadata.uid, "controller": true}]},
        "spec": {"replicas": 1, "selector": selector, "template": template}}),
    )
    .await;
    let pdbs = client.namespaced_api::<PodDisruptionBudget>(NS);
    pdbs.create(
        &PostParams::default(),
        &budget("mix", "mix", ("maxUnavailable", json!("20%"))),
    )
    .await
    .expect("pdb");
    // 3 + 2 + 5 + 4 expected; 20% of 14, rounded up, may be down, so 11 must be healthy; 4 are.
    let status = status_where(&pdbs, "mix", "14 expected, 4 healthy", |s| {
        s["expectedPods"] == 14 && s["currentHealthy"] == 4
    })
    .await;
    assert_eq!(status["desiredHealthy"], 11, "{status}");
    assert_eq!(status["currentHealthy"], 4, "{status}");
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");

    // A pod whose controller is gone: the sync fails safe.
    let pods = client.namespaced_api::<Pod>(NS);
    let mut orphan = serde_json::to_value(pod("lost-0", "mix")).expect("pod");
    orphan["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "lost", "uid": "0000-gone", "controller": true}]);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(orphan).expect("pod"),
    )
    .await
    .expect("pod");
    let status = status_where(&pdbs, "mix", "SyncFailed", |s| {
        condition(s).1 == "SyncFailed"
    })
    .await;
    assert_eq!(status["disruptionsAllowed"], 0, "{status}");
    running.stop().await;
}
