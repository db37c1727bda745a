//! Pausing and resuming a rollout, revisions, undo, and the revision history limit.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_should_stop_the_rollout_and_resume_continue_it() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    api.create(
        &PostParams::default(),
        &deployment("web", 2, "nginx:1", json!({"type": "RollingUpdate"})),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": true}})),
    )
    .await
    .expect("pause");
    set_image(&api, "web", "nginx:2").await;
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale while paused");
    let paused = eventually("the paused spec is observed", || async {
        let d = api.get("web").await.expect("get");
        let observed =
            d.status.as_ref().and_then(|s| s.observed_generation) >= d.metadata.generation;
        (observed
            && condition(&d, "Progressing")
                .is_some_and(|c| c.1.as_deref() == Some("DeploymentPaused")))
        .then_some(d)
    })
    .await;
    assert_eq!(
        condition(&paused, "Progressing").map(|c| c.0),
        Some("Unknown".into())
    );
    eventually(
        "the old replica set is scaled to 3 while paused",
        || async {
            let rses = replicasets(&rs_api, "web").await;
            (rses.len() == 1 && spec_replicas(&rses[0]) == 3).then_some(())
        },
    )
    .await;
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(rses.len(), 1, "no rollout while paused");

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": false}})),
    )
    .await
    .expect("resume");
    let done = rolled_out(&api, "web").await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.updated_replicas),
        Some(3)
    );
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(rses.len(), 2);
    assert_eq!(rses.iter().map(spec_replicas).collect::<Vec<_>>(), [0, 3]);
    eventually("Progressing leaves DeploymentPaused", || async {
        let d = api.get("web").await.expect("get");
        (condition(&d, "Progressing")
            == Some(("True".into(), Some("NewReplicaSetAvailable".into()))))
        .then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_undo_and_history_limit_should_work_as_in_kubernetes() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let mut d = deployment("web", 2, "nginx:1", json!({"type": "RollingUpdate"}));
    d.spec.as_mut().expect("spec").revision_history_limit = Some(2);
    api.create(&PostParams::default(), &d)
        .await
        .expect("create");
    rolled_out(&api, "web").await;
    let first = replicasets(&rs_api, "web").await.remove(0);

    for (i, image) in ["nginx:2", "nginx:3"].into_iter().enumerate() {
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"kubernetes.io/change-cause": format!("image {image}")}}})),
        )
        .await
        .expect("annotate");
        set_image(&api, "web", image).await;
        let done = rolled_out(&api, "web").await;
        assert_eq!(done.annotations().get(REVISION), Some(&(i + 2).to_string()));
    }
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(rses.iter().map(revision).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        rses[2]
            .annotations()
            .get("kubernetes.io/change-cause")
            .map(String::as_str),
        Some("image nginx:3")
    );

    // Undo to revision 1 (what kubectl does: put that ReplicaSet's template back).
    let mut template = first
        .spec
        .clone()
        .and_then(|s| s.template)
        .expect("template");
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove("pod-template-hash");
    }
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": template}})),
    )
    .await
    .expect("undo");
    let done = rolled_out(&api, "web").await;
    assert_eq!(
        done.annotations().get(REVISION).map(String::as_str),
        Some("4")
    );
    let reused = rs_api
        .get(&first.name_any())
        .await
        .expect("the first replica set is reused");
    assert_eq!(reused.uid(), first.uid());
    assert_eq!(spec_replicas(&reused), 2);
    assert_eq!(
        reused.annotations().get(REVISION).map(String::as_str),
        Some("4")
    );
    assert_eq!(
        reused
            .annotations()
            .get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("1")
    );

    // Another rollout makes three old replica sets; the limit keeps two.
    set_image(&api, "web", "nginx:5").await;
    rolled_out(&api, "web").await;
    let rses = eventually("history is cut to 2 old replica sets", || async {
        let rses = replicasets(&rs_api, "web").await;
        (rses.len() == 3).then_some(rses)
    })
    .await;
    assert_eq!(
        rses.iter().map(revision).collect::<Vec<_>>(),
        [3, 4, 5],
        "the lowest revision went"
    );
    running.stop().await;
}
