//! What triggers a reconcile: the generation predicate, and periodic resyncs.

use super::*;

fn deployment(name: &str) -> Deployment {
    let labels: BTreeMap<String, String> = [("app".to_owned(), name.to_owned())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some("example:1".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_predicate_should_filter_status_and_metadata_only_updates() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<Deployment>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let c = Arc::clone(&counts);
    let reconciler = move |d: Arc<Deployment>, _: Arc<()>| {
        c.record(&d.name_any());
        async { Ok::<_, String>(Action::await_change()) }
    };
    // One worker and a FIFO queue: a key enqueued before another is reconciled first.
    let controller = Controller::<Deployment>::new(&factory)
        .predicate(Predicate::generation_changed())
        .concurrency(1);
    let (running, _) = start(controller, reconciler, ());
    for name in ["web", "probe"] {
        api.create(&PostParams::default(), &deployment(name))
            .await
            .expect("create deployment");
    }
    eventually("both are reconciled once", || async {
        counts.of("web") == 1 && counts.of("probe") == 1
    })
    .await;

    let pp = PatchParams::default();
    let labels = Patch::Merge(json!({"metadata": {"labels": {"tier": "frontend"}}}));
    let web = api.patch("web", &pp, &labels).await.expect("label web");
    let status = Patch::Merge(json!({"status": {"observedGeneration": 1, "replicas": 1}}));
    let web_after = api
        .patch_status("web", &pp, &status)
        .await
        .expect("status of web");
    assert_eq!(
        web.metadata.generation, web_after.metadata.generation,
        "neither write bumped the generation"
    );
    // A spec change on the probe, after web's writes: once it is reconciled, any reconcile
    // those writes triggered would have started.
    let scale = Patch::Merge(json!({"spec": {"replicas": 2}}));
    api.patch("probe", &pp, &scale).await.expect("scale probe");
    eventually("the probe's spec change is reconciled", || async {
        counts.of("probe") == 2
    })
    .await;
    assert_eq!(
        counts.of("web"),
        1,
        "status/label-only updates were filtered"
    );

    api.patch("web", &pp, &scale).await.expect("scale web");
    eventually("web's spec change is reconciled", || async {
        counts.of("web") == 2
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_should_reconcile_cached_objects_periodically_despite_predicates() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    let factory = InformerFactory::new(env.client());
    let counts = Arc::new(Counts::default());
    let reconciler = counting(&counts, |_, _| async { Ok(Action::await_change()) });
    // ConfigMaps have no generation: without the resync, only the add would pass.
    let controller = Controller::<ConfigMap>::new(&factory)
        .predicate(Predicate::generation_changed())
        .resync(Duration::from_millis(200));
    let (running, _) = start(controller, reconciler, ());
    create_configmap(&api, "quiet").await;
    eventually("quiet is reconciled by resyncs", || async {
        counts.of("quiet") >= 3
    })
    .await;
    running.stop().await;
}
