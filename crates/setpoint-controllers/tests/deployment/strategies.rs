//! Rollouts under each strategy: rolling updates within surge and unavailability, recreate
//! without overlap, scaling in the middle of a rollout, and a rollout that never progresses.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_should_stay_within_surge_and_unavailability_at_every_moment() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(300));
    let api = client.namespaced_api::<Deployment>(NS);
    let (replicas, surge, unavailable) = (4_usize, 1_usize, 1_usize);
    api.create(
        &PostParams::default(),
        &deployment("web", 4, "nginx:1", rolling(json!(1), json!(1))),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    let saw_both = Arc::new(Mutex::new(false));
    let both = saw_both.clone();
    let observer = PodObserver::start(&client, move |pods| {
        let images: Vec<String> = pods.values().map(image_of).collect();
        if images.iter().any(|i| i == "nginx:1") && images.iter().any(|i| i == "nginx:2") {
            *both.lock() = true;
        }
        let ready = pods.values().filter(|p| is_ready(p)).count();
        if pods.len() > replicas + surge {
            Some(format!(
                "{} pods, more than {replicas} + {surge}: {:?}",
                pods.len(),
                pods.keys()
            ))
        } else if ready < replicas - unavailable {
            Some(format!(
                "{ready} ready pods, fewer than {replicas} - {unavailable}"
            ))
        } else {
            None
        }
    })
    .await;
    set_image(&api, "web", "nginx:2").await;
    let done = rolled_out(&api, "web").await;
    let (violations, events) = observer.finish();
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(events >= 8, "the rollout was watched ({events} events)");
    assert!(
        *saw_both.lock(),
        "old and new pods ran side by side during the rolling update"
    );
    assert_eq!(
        done.status.as_ref().and_then(|s| s.updated_replicas),
        Some(4)
    );
    let rses = replicasets(&client.namespaced_api::<ReplicaSet>(NS), "web").await;
    assert_eq!(rses.iter().map(spec_replicas).collect::<Vec<_>>(), [0, 4]);
    assert_eq!(rses.iter().map(revision).collect::<Vec<_>>(), [1, 2]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_should_never_run_old_and_new_pods_at_once() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(100));
    let api = client.namespaced_api::<Deployment>(NS);
    api.create(
        &PostParams::default(),
        &deployment("web", 3, "nginx:1", json!({"type": "Recreate"})),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    let observer = PodObserver::start(&client, |pods| {
        let hashes: std::collections::BTreeSet<_> = pods
            .values()
            .filter_map(|p| p.labels().get("pod-template-hash").cloned())
            .collect();
        (hashes.len() > 1).then(|| format!("pods of several templates at once: {hashes:?}"))
    })
    .await;
    set_image(&api, "web", "nginx:2").await;
    let done = rolled_out(&api, "web").await;
    let (violations, events) = observer.finish();
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(events >= 6, "the rollout was watched ({events} events)");
    assert_eq!(
        done.status.as_ref().and_then(|s| s.available_replicas),
        Some(3)
    );
    let pods = client
        .namespaced_api::<Pod>(NS)
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items;
    assert!(pods.iter().all(|p| image_of(p) == "nginx:2"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_should_wait_until_terminating_old_pods_are_gone() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let nodes = Nodes::Bound {
        stop_after: Duration::from_millis(500),
    };
    let _kubelet = Kubelet::start_with(&client, Duration::ZERO, nodes);
    let api = client.namespaced_api::<Deployment>(NS);
    // Pods made on a node: deleting them is graceful, they stay until the kubelet is done.
    let mut d = deployment("web", 2, "nginx:1", json!({"type": "Recreate"}));
    if let Some(spec) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        spec.node_name = Some("node-a".into());
    }
    api.create(&PostParams::default(), &d)
        .await
        .expect("create");
    rolled_out(&api, "web").await;

    let saw_terminating = Arc::new(Mutex::new(false));
    let terminating = saw_terminating.clone();
    let observer = PodObserver::start_with(&client, Terminating::Included, move |pods| {
        if pods
            .values()
            .any(|p| p.metadata.deletion_timestamp.is_some())
        {
            *terminating.lock() = true;
        }
        let hashes: std::collections::BTreeSet<_> = pods
            .values()
            .filter_map(|p| p.labels().get("pod-template-hash").cloned())
            .collect();
        (hashes.len() > 1)
            .then(|| format!("pods of several templates, terminating ones included: {hashes:?}"))
    })
    .await;
    set_image(&api, "web", "nginx:2").await;
    rolled_out(&api, "web").await;
    let (violations, _) = observer.finish();
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(*saw_terminating.lock(), "old pods terminated gracefully");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_should_exceed_its_progress_deadline() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let mut d = deployment("web", 2, NEVER_READY, json!({"type": "RollingUpdate"}));
    d.spec.as_mut().expect("spec").progress_deadline_seconds = Some(2);
    api.create(&PostParams::default(), &d)
        .await
        .expect("create");
    let stuck = eventually("Progressing is ProgressDeadlineExceeded", || async {
        let d = api.get("web").await.expect("get");
        (condition(&d, "Progressing")
            == Some(("False".into(), Some("ProgressDeadlineExceeded".into()))))
        .then_some(d)
    })
    .await;
    assert_eq!(
        condition(&stuck, "Available").map(|c| c.0),
        Some("False".into())
    );
    let message = stuck
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "Progressing")
                .and_then(|c| c.message.clone())
        });
    assert!(message.is_some_and(|m| m.contains("has timed out progressing")));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_mid_rollout_should_be_proportional() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    api.create(
        &PostParams::default(),
        &deployment("web", 10, "nginx:1", rolling(json!(3), json!(2))),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    // A rollout that cannot finish: 13 pods at most, 8 available at least.
    set_image(&api, "web", NEVER_READY).await;
    let sizes = |rses: &[ReplicaSet]| rses.iter().map(spec_replicas).collect::<Vec<_>>();
    eventually("the stuck rollout settles at old 8, new 5", || async {
        let rses = replicasets(&rs_api, "web").await;
        (sizes(&rses) == [8, 5]).then_some(())
    })
    .await;
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 20}})),
    )
    .await
    .expect("scale");
    // 23 (20 + surge 3) shared in proportion to 8:5 of 13: 14 and 9.
    eventually("the new size is shared proportionally", || async {
        let rses = replicasets(&rs_api, "web").await;
        (sizes(&rses) == [14, 9]).then_some(())
    })
    .await;
    let rses = replicasets(&rs_api, "web").await;
    for rs in &rses {
        assert_eq!(
            rs.annotations()
                .get("deployment.kubernetes.io/desired-replicas")
                .map(String::as_str),
            Some("20")
        );
        assert_eq!(
            rs.annotations()
                .get("deployment.kubernetes.io/max-replicas")
                .map(String::as_str),
            Some("23")
        );
    }
    running.stop().await;
}
