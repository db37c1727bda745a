//! The DaemonSet loop with the scheduler: one pod per eligible node (node selector, taints,
//! the automatic tolerations of cordoned nodes), pods following nodes added, relabelled and
//! removed, the status, a rolling update within `maxUnavailable`, and a surge update that
//! never leaves a node without an available pod.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use setpoint_testenv::{eventually, TestEnv};

use crate::common::run_loops;
use crate::workloads::sets_kit::{add_node, image_of, is_ready, live_pods, Kubelet, NS};

fn daemonset(name: &str, image: &str, extra: serde_json::Value) -> DaemonSet {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "nodeSelector": {"role": "worker"},
                "containers": [{"name": "agent", "image": image}],
            },
        },
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("daemonset")
}

fn node_name(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// The live pods of `app` by node (bound ones only).
async fn by_node(api: &Api<Pod>, app: &str) -> BTreeMap<String, Vec<Pod>> {
    let mut map: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for pod in live_pods(api, app).await {
        map.entry(node_name(&pod)).or_default().push(pod);
    }
    map
}

/// Each node's pods as `name image ready`.
fn summary(map: &BTreeMap<String, Vec<Pod>>) -> String {
    let mut out = String::new();
    for (node, pods) in map {
        let pods: Vec<String> = pods
            .iter()
            .map(|p| format!("{} {} ready={}", p.name_any(), image_of(p), is_ready(p)))
            .collect();
        out.push_str(&format!("{node:?}: {pods:?}; "));
    }
    out
}

async fn status(api: &Api<DaemonSet>, name: &str) -> DaemonSetStatus {
    api.get(name).await.expect("get").status.unwrap_or_default()
}

async fn wait_nodes(api: &Api<Pod>, app: &str, nodes: &[&str]) {
    eventually(
        &format!("one ready pod of {app} on each of {nodes:?}"),
        || async {
            let map = by_node(api, app).await;
            let ok = map.keys().map(String::as_str).eq(nodes.iter().copied())
                && map.values().all(|p| p.len() == 1 && is_ready(&p[0]));
            ok.then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_should_run_one_pod_per_eligible_node_and_follow_nodes() {
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let worker = json!({"role": "worker"});
    add_node(&client, "n1", worker.clone(), json!({})).await;
    add_node(
        &client,
        "n2",
        worker.clone(),
        json!({"unschedulable": true}),
    )
    .await;
    add_node(&client, "n3", json!({"role": "db"}), json!({})).await;
    add_node(
        &client,
        "n4",
        worker.clone(),
        json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}),
    )
    .await;
    let loops = run_loops(&client, "daemonset,scheduler");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(50), true);
    let sets = client.namespaced_api::<DaemonSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    sets.create(
        &PostParams::default(),
        &daemonset("agent", "agent:1", json!({})),
    )
    .await
    .expect("create");
    // n2 is cordoned (tolerated), n3 selected out, n4 tainted.
    wait_nodes(&pods, "agent", &["n1", "n2"]).await;
    let pod = &live_pods(&pods, "agent").await[0];
    let spec = pod.spec.clone().expect("spec");
    let tolerations: Vec<String> = spec
        .tolerations
        .iter()
        .flatten()
        .filter_map(|t| t.key.clone())
        .collect();
    assert!(tolerations.contains(&"node.kubernetes.io/unschedulable".to_owned()));
    assert!(tolerations.contains(&"node.kubernetes.io/not-ready".to_owned()));
    let term = &spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|a| a.required_during_scheduling_ignored_during_execution)
        .expect("required affinity")
        .node_selector_terms[0];
    assert_eq!(
        term.match_fields.as_ref().expect("fields")[0].key,
        "metadata.name"
    );
    let s = eventually("status", || async {
        let s = status(&sets, "agent").await;
        (s.number_available == Some(2)).then_some(s)
    })
    .await;
    assert_eq!(s.desired_number_scheduled, 2);
    assert_eq!(s.current_number_scheduled, 2);
    assert_eq!(s.number_ready, 2);
    assert_eq!(s.updated_number_scheduled, Some(2));
    assert_eq!(s.number_misscheduled, 0);
    assert_eq!(s.number_unavailable, Some(0));

    // A new worker gets a pod; a relabelled one loses it; a deleted one too.
    add_node(&client, "n5", worker.clone(), json!({})).await;
    wait_nodes(&pods, "agent", &["n1", "n2", "n5"]).await;
    let nodes = client.api::<Node>();
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"role": "db"}}})),
        )
        .await
        .expect("relabel");
    nodes
        .patch(
            "n3",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"role": "worker"}}})),
        )
        .await
        .expect("relabel");
    wait_nodes(&pods, "agent", &["n2", "n3", "n5"]).await;
    nodes
        .delete("n5", &DeleteParams::default())
        .await
        .expect("delete node");
    wait_nodes(&pods, "agent", &["n2", "n3"]).await;
    eventually("desired follows", || async {
        let s = status(&sets, "agent").await;
        (s.desired_number_scheduled == 2 && s.number_available == Some(2)).then_some(())
    })
    .await;

    // A NoSchedule taint: the pod may stay, but is misscheduled; NoExecute: it goes.
    let taint = |effect: &str| json!({"spec": {"taints": [{"key": "maintenance", "value": "yes", "effect": effect}]}});
    nodes
        .patch(
            "n3",
            &PatchParams::default(),
            &Patch::Merge(taint("NoSchedule")),
        )
        .await
        .expect("taint");
    let s = eventually("n3 misscheduled", || async {
        let s = status(&sets, "agent").await;
        (s.number_misscheduled == 1).then_some(s)
    })
    .await;
    assert_eq!(s.desired_number_scheduled, 1);
    wait_nodes(&pods, "agent", &["n2", "n3"]).await;
    nodes
        .patch(
            "n3",
            &PatchParams::default(),
            &Patch::Merge(taint("NoExecute")),
        )
        .await
        .expect("taint");
    wait_nodes(&pods, "agent", &["n2"]).await;
    loops.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_should_keep_within_max_unavailable_and_surge_should_keep_every_node_served()
{
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    let worker = json!({"role": "worker"});
    for n in ["n1", "n2", "n3", "n4"] {
        add_node(&client, n, worker.clone(), json!({})).await;
    }
    let loops = run_loops(&client, "daemonset,scheduler");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(200), true);
    let sets = client.namespaced_api::<DaemonSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let all = ["n1", "n2", "n3", "n4"];
    sets.create(
        &PostParams::default(),
        &daemonset("agent", "agent:1", json!({})),
    )
    .await
    .expect("create");
    wait_nodes(&pods, "agent", &all).await;

    let image = |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": image}]}}}});
    // maxUnavailable 1 (the default): at most one node without a ready pod at any time.
    sets.patch(
        "agent",
        &PatchParams::default(),
        &Patch::Strategic(image("agent:2")),
    )
    .await
    .expect("update");
    eventually("all on agent:2", || async {
        let map = by_node(&pods, "agent").await;
        let served = all
            .iter()
            .filter(|n| map.get(**n).is_some_and(|p| p.iter().any(is_ready)))
            .count();
        assert!(
            served >= 3,
            "more than one node unavailable: {}",
            summary(&map)
        );
        let done = map.len() == 4
            && map
                .values()
                .all(|p| p.len() == 1 && is_ready(&p[0]) && image_of(&p[0]) == "agent:2");
        done.then_some(())
    })
    .await;
    eventually("status updated", || async {
        let s = status(&sets, "agent").await;
        (s.updated_number_scheduled == Some(4) && s.number_available == Some(4)).then_some(())
    })
    .await;

    // Surge: a new pod first, the old one deleted once the new is ready; no node unserved.
    sets.patch(
        "agent",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}})),
    )
    .await
    .expect("strategy");
    sets.patch(
        "agent",
        &PatchParams::default(),
        &Patch::Strategic(image("agent:3")),
    )
    .await
    .expect("update");
    let saw_two = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    eventually("all on agent:3", || {
        let pods = pods.clone();
        let saw = saw_two.clone();
        async move {
            let map = by_node(&pods, "agent").await;
            for n in all {
                let ready = map.get(n).is_some_and(|p| p.iter().any(is_ready));
                assert!(
                    ready,
                    "node {n} without a ready pod during a surge: {}",
                    summary(&map)
                );
            }
            if map.values().any(|p| p.len() == 2) {
                saw.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let done = map.len() == 4
                && map
                    .values()
                    .all(|p| p.len() == 1 && image_of(&p[0]) == "agent:3" && is_ready(&p[0]));
            done.then_some(())
        }
    })
    .await;
    assert!(
        saw_two.load(std::sync::atomic::Ordering::SeqCst),
        "a surge pod ran beside an old one"
    );
    let revisions = client
        .namespaced_api::<ControllerRevision>(NS)
        .list(&ListParams::default())
        .await
        .expect("revisions")
        .items;
    let mut numbers: Vec<i64> = revisions.iter().map(|r| r.revision).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [1, 2, 3]);
    assert!(revisions
        .iter()
        .all(|r| r.owner_references()[0].name == "agent"));
    loops.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pod_should_be_replaced_and_on_delete_should_wait_for_deletes() {
    let env = TestEnv::start().await.expect("test server");
    let client = env.client();
    for n in ["n1", "n2"] {
        add_node(&client, n, json!({"role": "worker"}), json!({})).await;
    }
    let loops = run_loops(&client, "daemonset,scheduler");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(50), true);
    let sets = client.namespaced_api::<DaemonSet>(NS);
    let pods = client.namespaced_api::<Pod>(NS);
    let extra = json!({"updateStrategy": {"type": "OnDelete"}});
    sets.create(
        &PostParams::default(),
        &daemonset("agent", "agent:1", extra),
    )
    .await
    .expect("create");
    wait_nodes(&pods, "agent", &["n1", "n2"]).await;

    let failed = by_node(&pods, "agent").await["n1"][0].name_any();
    pods.patch_status(
        &failed,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .expect("fail");
    eventually("n1's failed pod replaced", || async {
        let map = by_node(&pods, "agent").await;
        let n1 = map.get("n1")?;
        (n1.len() == 1 && n1[0].name_any() != failed && is_ready(&n1[0])).then_some(())
    })
    .await;

    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}});
    sets.patch("agent", &PatchParams::default(), &Patch::Strategic(image))
        .await
        .expect("update");
    eventually("the new revision observed", || async {
        let ds = sets.get("agent").await.ok()?;
        let s = ds.status?;
        (s.observed_generation == ds.metadata.generation && s.updated_number_scheduled == Some(0))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(live_pods(&pods, "agent")
        .await
        .iter()
        .all(|p| image_of(p) == "agent:1"));
    let old = by_node(&pods, "agent").await["n2"][0].name_any();
    pods.delete(&old, &DeleteParams::default())
        .await
        .expect("delete");
    eventually("n2 on agent:2, n1 untouched", || async {
        let map = by_node(&pods, "agent").await;
        let images: Vec<(String, String)> = map
            .iter()
            .flat_map(|(n, p)| p.iter().map(move |p| (n.clone(), image_of(p))))
            .collect();
        (images
            == [
                ("n1".into(), "agent:1".into()),
                ("n2".into(), "agent:2".into()),
            ])
        .then_some(())
    })
    .await;
    loops.stop().await;
}
