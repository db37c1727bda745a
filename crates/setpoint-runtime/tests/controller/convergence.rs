//! Convergence, owned objects and watches: a mirror controller follows edits and repairs
//! drift; watches enqueue the keys their mapper returns.

use super::*;

struct MirrorContext {
    client: Client,
}

/// Keeps `<name>-mirror` a copy of every ConfigMap's data, controlled by the source.
async fn mirror(cm: Arc<ConfigMap>, ctx: Arc<MirrorContext>) -> Result<Action, kube::Error> {
    let name = cm.name_any();
    if name.ends_with("-mirror") {
        return Ok(Action::await_change());
    }
    let namespace = cm.namespace().unwrap_or_else(|| NS.to_owned());
    let api = ctx.client.namespaced_api::<ConfigMap>(&namespace);
    let mirror_name = format!("{name}-mirror");
    match api.get_opt(&mirror_name).await? {
        None => {
            let desired = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(mirror_name),
                    namespace: Some(namespace),
                    owner_references: cm.controller_owner_ref(&()).map(|r| vec![r]),
                    ..Default::default()
                },
                data: cm.data.clone(),
                ..Default::default()
            };
            api.create(&PostParams::default(), &desired).await?;
        }
        Some(existing) if existing.data == cm.data => {}
        Some(mut existing) => {
            existing.data = cm.data.clone();
            api.replace(&mirror_name, &PostParams::default(), &existing)
                .await?;
        }
    }
    Ok(Action::await_change())
}

/// The mirror's data, if it exists and is controlled by `owner`.
async fn mirror_data(api: &Api<ConfigMap>, owner: &str) -> Option<BTreeMap<String, String>> {
    let mirror = api
        .get_opt(&format!("{owner}-mirror"))
        .await
        .expect("get mirror")?;
    let owned = mirror
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.kind == "ConfigMap" && r.name == owner);
    owned.then(|| mirror.data.unwrap_or_default())
}

/// Polls the mirror of `owner` until its data is `want`.
async fn eventually_mirror(api: &Api<ConfigMap>, owner: &str, want: &[(&str, &str)]) {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while mirror_data(api, owner).await.as_ref() != Some(&want) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {owner}-mirror = {want:?}"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_controller_should_converge_follow_edits_and_repair_drift() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.client().namespaced_api::<ConfigMap>(NS);
    api.create(&PostParams::default(), &configmap("x", &[("a", "1")]))
        .await
        .expect("create x");
    let factory = InformerFactory::new(env.client());
    let controller = Controller::<ConfigMap>::new(&factory).owns::<ConfigMap>();
    let context = MirrorContext {
        client: env.client(),
    };
    let (running, handle) = start(controller, mirror, context);

    eventually_mirror(&api, "x", &[("a", "1")]).await;

    let mut x = api.get("x").await.expect("get x");
    x.data = Some([("a".to_owned(), "2".to_owned())].into());
    api.replace("x", &PostParams::default(), &x)
        .await
        .expect("edit x");
    eventually_mirror(&api, "x", &[("a", "2")]).await;

    // Drift: only the owner mapping can bring the mirror back (x itself did not change).
    api.delete("x-mirror", &DeleteParams::default())
        .await
        .expect("delete the mirror");
    eventually_mirror(&api, "x", &[("a", "2")]).await;

    let m = handle.metrics();
    assert_eq!(m.reconcile_error_total, 0);
    assert_eq!(handle.name(), "configmaps");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_should_enqueue_the_keys_the_mapper_returns() {
    let env = TestEnv::start().await.expect("test env");
    let configmaps = env.client().namespaced_api::<ConfigMap>(NS);
    let secrets = env.client().namespaced_api::<Secret>(NS);
    create_configmap(&configmaps, "target").await;
    let factory = InformerFactory::new(env.client());
    let controller = Controller::<ConfigMap>::new(&factory).watches(|s: &Secret| {
        s.labels()
            .get("for")
            .map(|name| ObjectKey::namespaced(NS, name.clone()))
    });
    let counts = Arc::new(Counts::default());
    let reconciler = counting(&counts, |_, _| async { Ok(Action::await_change()) });
    let (running, _) = start(controller, reconciler, ());
    eventually("target is reconciled once", || async {
        counts.of("target") == 1
    })
    .await;

    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("s".into()),
            labels: Some([("for".to_owned(), "target".to_owned())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    eventually("the secret triggers target", || async {
        counts.of("target") == 2
    })
    .await;
    running.stop().await;
}
