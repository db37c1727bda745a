//! What the cache holds and how it is read: indexes and selectors, partial object metadata,
//! transformed, dynamic and compact objects.

use super::*;

fn pod(name: &str, node: &str, app: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn informer_should_index_and_select_cached_objects() {
    index_and_select_cached_objects(InformerOptions::default()).await;
}

#[tokio::test]
async fn compact_informer_should_index_and_select_cached_objects() {
    index_and_select_cached_objects(InformerOptions::default().compact()).await;
}

async fn index_and_select_cached_objects(options: InformerOptions<Pod>) {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    namespace(&client, "n1").await;
    namespace(&client, "n2").await;
    for (ns, name, node, app) in [
        ("n1", "a", "node1", "web"),
        ("n1", "b", "node2", "db"),
        ("n2", "c", "node1", "web"),
    ] {
        client
            .namespaced_api::<Pod>(ns)
            .create(&PostParams::default(), &pod(name, node, app))
            .await
            .expect("pod created");
    }
    let factory = InformerFactory::new(client.clone());
    let informer = factory.informer_with::<Pod>(options);
    factory.start();
    synced(&informer).await;
    // Added after the objects are cached: they are indexed at once.
    let by_node: IndexFn<Pod> = Arc::new(|p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .into_iter()
            .collect()
    });
    informer.add_index("node", by_node);
    let store = informer.store();
    assert_eq!(
        keys(&store.by_index("node", "node1").expect("index")),
        ["n1/a", "n2/c"]
    );
    assert_eq!(keys(&store.list_namespace("n1")), ["n1/a", "n1/b"]);
    let web = setpoint_core::LabelSelector::parse("app=web").expect("selector");
    assert_eq!(keys(&store.list_selected(None, &web)), ["n1/a", "n2/c"]);
    assert_eq!(keys(&store.list_selected(Some("n2"), &web)), ["n2/c"]);
    assert!(store.by_index("owner", "x").is_err());

    // Kept current as objects come and go.
    client
        .namespaced_api::<Pod>("n2")
        .create(&PostParams::default(), &pod("d", "node1", "web"))
        .await
        .expect("pod created");
    until("the new pod is indexed", || {
        store
            .by_index("node", "node1")
            .map(|p| p.len())
            .unwrap_or(0)
            == 3
    })
    .await;
}

#[tokio::test]
async fn metadata_informer_should_cache_partial_object_metadata() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let api = namespace(&env.client(), "meta").await;
    create(&api, "a", &[("app", "web")]).await;
    let informer = factory.metadata_informer::<ConfigMap>();
    factory.start();
    synced(&informer).await;
    let cached = informer
        .store()
        .get(&ObjectKey::namespaced("meta", "a"))
        .expect("cached");
    assert_eq!(cached.labels().get("app").map(String::as_str), Some("web"));
    assert!(cached.metadata.resource_version.is_some());
    let labels: Vec<_> = factory
        .metrics()
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert_eq!(labels, ["configmaps{metadata}"]);
}

#[tokio::test]
async fn informer_should_cache_transformed_objects() {
    for options in [
        InformerOptions::default(),
        InformerOptions::default().compact(),
    ] {
        cache_transformed_objects(options).await;
    }
}

async fn cache_transformed_objects(options: InformerOptions<ConfigMap>) {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let api = namespace(&env.client(), "slim").await;
    create(&api, "a", &[]).await;
    let informer = factory.informer_with::<ConfigMap>(InformerOptions {
        // Drops the annotations and marks the object each time it runs: once per object.
        transform: Some(Arc::new(|mut cm: ConfigMap| {
            cm.metadata.annotations = None;
            cm.labels_mut()
                .entry("transformed".into())
                .or_default()
                .push('x');
            cm
        })),
        ..options
    });
    factory.start();
    synced(&informer).await;
    create(&api, "b", &[]).await;
    let store = informer.store();
    until("b is cached", || store.len() == 2).await;
    for cm in store.list() {
        assert!(
            cm.metadata.annotations.is_none(),
            "listed and watched objects are transformed"
        );
        assert_eq!(
            cm.labels().get("transformed").map(String::as_str),
            Some("x"),
            "transformed exactly once"
        );
    }
    assert!(api
        .get("a")
        .await
        .expect("get")
        .metadata
        .annotations
        .is_some());
}

#[tokio::test]
async fn dynamic_informer_should_cache_dynamic_objects() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let api = namespace(&env.client(), "dyn").await;
    create(&api, "a", &[]).await;
    let resource = ApiResource::erase::<ConfigMap>(&());
    let informer = factory.dynamic_informer(&resource, InformerOptions::default());
    factory.start();
    synced(&informer).await;
    let cached: Arc<DynamicObject> = informer
        .store()
        .get(&ObjectKey::namespaced("dyn", "a"))
        .expect("cached");
    assert_eq!(cached.data["data"]["k"], "v");
}

#[tokio::test]
async fn compact_informers_should_return_objects_as_the_server_has_them() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let factory = InformerFactory::new(client.clone());
    let api = namespace(&client, "compact").await;
    let created = create(&api, "a", &[("app", "web")]).await;
    let pods = client.namespaced_api::<Pod>("compact");
    let pod = pods
        .create(&PostParams::default(), &pod("p", "node1", "web"))
        .await
        .expect("pod created");
    let resource = ApiResource::erase::<ConfigMap>(&());
    let typed = factory.informer_with::<Pod>(InformerOptions::default().compact());
    let dynamic = factory.dynamic_informer(&resource, InformerOptions::default().compact());
    let metadata =
        factory.dynamic_metadata_informer(&resource, InformerOptions::default().compact());
    factory.start();
    factory.wait_for_sync().await;
    assert!(typed.store().is_compact() && dynamic.store().is_compact());
    let key = ObjectKey::namespaced("compact", "a");
    assert_eq!(
        typed
            .store()
            .get(&ObjectKey::namespaced("compact", "p"))
            .as_deref(),
        Some(&pod)
    );
    let cached = dynamic.store().get(&key).expect("cached");
    assert_eq!(cached.data["data"], serde_json::json!(created.data));
    assert_eq!(cached.metadata, created.metadata);
    let meta = metadata.store().get(&key).expect("cached");
    assert_eq!(meta.metadata, created.metadata);
    // A change arrives through the watch.
    let mut changed = created.clone();
    changed.data = Some(BTreeMap::from([("k".to_string(), "changed".to_string())]));
    let changed = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .expect("replace");
    let store = dynamic.store();
    until("the change is cached", || {
        store
            .get(&key)
            .is_some_and(|o| o.metadata.resource_version == changed.metadata.resource_version)
    })
    .await;
    assert_eq!(
        store.get(&key).expect("cached").data["data"]["k"],
        "changed"
    );
}
