//! A Deployment's own objects: the ReplicaSet and pods it creates, the status it reports, and
//! the orphans it adopts or releases.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_should_get_a_replicaset_pods_and_a_true_status() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let mut d = deployment("web", 3, "nginx:1", json!({"type": "RollingUpdate"}));
    d.metadata.annotations =
        Some([("kubernetes.io/change-cause".to_owned(), "first".to_owned())].into());
    let created = api
        .create(&PostParams::default(), &d)
        .await
        .expect("create");

    let done = rolled_out(&api, "web").await;
    let s = done.status.clone().expect("status");
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas,
            s.unavailable_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3), Some(0))
    );
    assert_eq!(
        condition(&done, "Available"),
        Some(("True".into(), Some("MinimumReplicasAvailable".into())))
    );
    let done = eventually("Progressing says NewReplicaSetAvailable", || async {
        let d = api.get("web").await.expect("get");
        (condition(&d, "Progressing")
            == Some(("True".into(), Some("NewReplicaSetAvailable".into()))))
        .then_some(d)
    })
    .await;
    assert_eq!(
        done.annotations().get(REVISION).map(String::as_str),
        Some("1")
    );

    let rses = replicasets(&client.namespaced_api::<ReplicaSet>(NS), "web").await;
    assert_eq!(rses.len(), 1);
    let rs = &rses[0];
    let hash = rs
        .labels()
        .get("pod-template-hash")
        .cloned()
        .expect("hash label");
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(
        rs.spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.as_ref())
            .and_then(|l| l.get("pod-template-hash")),
        Some(&hash)
    );
    let owner = &rs.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        (
            "Deployment",
            created.uid().expect("uid").as_str(),
            Some(true)
        )
    );
    let annotations = rs.annotations();
    assert_eq!(annotations.get(REVISION).map(String::as_str), Some("1"));
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/max-replicas")
            .map(String::as_str),
        Some("4"),
        "3 + 25% rounded up"
    );
    assert_eq!(
        annotations
            .get("kubernetes.io/change-cause")
            .map(String::as_str),
        Some("first")
    );
    let pods = client
        .namespaced_api::<Pod>(NS)
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("pods")
        .items;
    assert_eq!(pods.len(), 3);
    assert!(pods
        .iter()
        .all(|p| p.labels().get("pod-template-hash") == Some(&hash)));
    let events_api = client.namespaced_api::<k8s_openapi::api::events::v1::Event>(NS);
    let note = format!("Scaled up replica set web-{hash} from 0 to 3");
    eventually("a ScalingReplicaSet event", || async {
        let events = events_api
            .list(&ListParams::default())
            .await
            .expect("events")
            .items;
        events
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("ScalingReplicaSet")
                    && e.note.as_deref() == Some(note.as_str())
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Deployment")
            })
            .then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_should_adopt_a_matching_orphan_and_release_one_relabelled_away() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let d = deployment("web", 2, "nginx:1", json!({"type": "RollingUpdate"}));
    // An orphan with the Deployment's template (and a hash label of its own), made first.
    let spec = d.spec.clone().expect("spec");
    let mut template = spec.template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.insert("pod-template-hash".into(), "orphan".into());
    }
    let orphan: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web-orphan", "labels": {"app": "web", "pod-template-hash": "orphan"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web", "pod-template-hash": "orphan"}},
            "template": template,
        },
    }))
    .expect("a valid replica set");
    rs_api
        .create(&PostParams::default(), &orphan)
        .await
        .expect("create orphan");
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let created = api
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    rolled_out(&api, "web").await;
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(
        rses.len(),
        1,
        "the orphan is the new replica set: {rses:#?}"
    );
    assert_eq!(rses[0].name_any(), "web-orphan");
    assert_eq!(
        rses[0].owner_references().first().map(|r| r.uid.clone()),
        created.uid()
    );

    // Relabelled out of the selector, it is released (and a new one made in its place).
    rs_api
        .patch(
            "web-orphan",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "elsewhere"}}})),
        )
        .await
        .expect("relabel");
    eventually("the relabelled replica set is released", || async {
        let rs = rs_api.get("web-orphan").await.expect("get");
        rs.owner_references().is_empty().then_some(())
    })
    .await;
    eventually("a new replica set replaces it", || async {
        let rses = replicasets(&rs_api, "web").await;
        (rses.len() == 1 && rses[0].name_any() != "web-orphan").then_some(())
    })
    .await;
    running.stop().await;
}
