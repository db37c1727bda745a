//! Shared informers against a real in-process API server: one watch per shared informer,
//! handlers (late, slow), relists after falling behind (tombstones), watch renewal without
//! relisting, loud list errors, indexes and selectors, metadata-only and dynamic informers.

mod fixtures;
mod gated;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fixtures::namespace;
use gated::Gate;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use parking_lot::Mutex;
use setpoint_runtime::{
    Deleted, EventHandler, IndexFn, InformerFactory, InformerOptions, ObjectKey, SharedInformer,
    WatchBackoff,
};
use setpoint_testenv::TestEnv;
use tokio::sync::mpsc;

/// A config map with a 100-byte annotation besides its label and data.
async fn create(api: &Api<ConfigMap>, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let annotations = BTreeMap::from([("big".to_string(), "x".repeat(100))]);
    fixtures::create_configmap(api, name, labels, Some(annotations)).await
}

/// Reports each call as a line on a channel: `add ns/a initial`, `update ns/a`,
/// `delete ns/a unknown`.
struct Recorder(mpsc::UnboundedSender<String>);

fn recorder() -> (Recorder, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Recorder(tx), rx)
}

impl<K: kube::Resource + Send + Sync + 'static> EventHandler<K> for Recorder {
    fn on_add(&self, object: &Arc<K>, in_initial_list: bool) {
        let initial = if in_initial_list { " initial" } else { "" };
        let _ = self
            .0
            .send(format!("add {}{initial}", ObjectKey::of(object.as_ref())));
    }

    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        let _ = self
            .0
            .send(format!("update {}", ObjectKey::of(new.as_ref())));
    }

    fn on_delete(&self, deleted: &Deleted<K>) {
        let how = if deleted.is_final_state_unknown() {
            "unknown"
        } else {
            "final"
        };
        let _ = self.0.send(format!(
            "delete {} {how}",
            ObjectKey::of(deleted.object().as_ref())
        ));
    }
}

async fn take(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        let line = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out after {out:?}"))
            .expect("the handler is alive");
        out.push(line);
    }
    out
}

async fn synced<K>(informer: &SharedInformer<K>)
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    tokio::time::timeout(Duration::from_secs(30), informer.wait_until_synced())
        .await
        .expect("synced within 30 s");
}

/// Waits (up to 30 s) until `condition` holds.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let wait = async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
}

fn keys<K: kube::Resource>(objects: &[Arc<K>]) -> Vec<String> {
    objects
        .iter()
        .map(|o| ObjectKey::of(o.as_ref()).to_string())
        .collect()
}

#[tokio::test]
async fn factory_should_share_one_watch_between_callers() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let factory = InformerFactory::new(client.clone());
    let api = namespace(&client, "shared").await;
    create(&api, "a", &[]).await;
    let first = factory.informer::<ConfigMap>();
    let second = factory.informer::<ConfigMap>();
    let (recorder, mut rx) = recorder();
    second.add_handler(recorder);
    factory.start();
    factory.wait_for_sync().await;
    assert_eq!(factory.metrics().len(), 1, "one informer for both callers");
    create(&api, "b", &[]).await;
    assert!(take(&mut rx, 2).await.contains(&"add shared/b".to_string()));
    assert!(first
        .store()
        .get(&ObjectKey::namespaced("shared", "b"))
        .is_some());
    let metrics = first.metrics();
    assert_eq!(metrics, second.metrics());
    assert_eq!(metrics.lists_total, 1);
    // One list-and-watch on the wire for the pair: at most one streaming list, one paged list
    // and one watch (the paged list and watch when the streaming list was refused).
    let requests: Vec<_> = gate
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /api/v1/configmaps?"))
        .collect();
    let count = |f: fn(&String) -> bool| requests.iter().filter(|r| f(r)).count();
    let streams = count(|r| r.contains("sendInitialEvents=true"));
    let lists = count(|r| !r.contains("watch=true"));
    let watches = count(|r| r.contains("watch=true") && !r.contains("sendInitialEvents"));
    assert!(streams <= 1 && lists <= 1 && watches <= 1, "{requests:?}");

    // Another namespace or selector is another informer (started at once: the factory runs).
    let scoped = factory.informer_with::<ConfigMap>(InformerOptions {
        namespace: Some("shared".into()),
        ..Default::default()
    });
    synced(&scoped).await;
    let labels: Vec<_> = factory
        .metrics()
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert_eq!(labels, ["configmaps", "configmaps{namespace=shared}"]);
    factory.shut_down();
}

#[tokio::test]
async fn informer_should_give_a_late_handler_synthetic_adds_then_changes() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let api = namespace(&env.client(), "late").await;
    for name in ["a", "b", "c"] {
        create(&api, name, &[]).await;
    }
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    synced(&informer).await;
    let (recorder, mut rx) = recorder();
    let registration = informer.add_handler(recorder);
    let mut adds = take(&mut rx, 3).await;
    adds.sort();
    assert_eq!(
        adds,
        [
            "add late/a initial",
            "add late/b initial",
            "add late/c initial"
        ]
    );
    until("the handler has synced", || registration.has_synced()).await;
    create(&api, "d", &[]).await;
    assert_eq!(take(&mut rx, 1).await, ["add late/d"]);
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    assert_eq!(take(&mut rx, 1).await, ["delete late/a final"]);
}

/// Blocks in its first call until released.
struct Slow {
    release: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    seen: Recorder,
}

impl EventHandler<ConfigMap> for Slow {
    fn on_add(&self, object: &Arc<ConfigMap>, in_initial_list: bool) {
        if let Some(release) = self.release.lock().take() {
            let _ = release.recv();
        }
        EventHandler::<ConfigMap>::on_add(&self.seen, object, in_initial_list);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_should_not_let_a_slow_handler_delay_a_fast_one() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client());
    let api = namespace(&env.client(), "slow").await;
    let informer = factory.informer::<ConfigMap>();
    let (release, released) = std::sync::mpsc::channel();
    let (slow_seen, mut slow_rx) = recorder();
    informer.add_handler(Slow {
        release: Mutex::new(Some(released)),
        seen: slow_seen,
    });
    let (fast, mut fast_rx) = recorder();
    informer.add_handler(fast);
    factory.start();
    synced(&informer).await;
    for i in 0..10 {
        create(&api, &format!("cm{i}"), &[]).await;
    }
    // The fast handler gets all ten while the slow one is stuck in its first call.
    assert_eq!(take(&mut fast_rx, 10).await.len(), 10);
    assert!(
        slow_rx.try_recv().is_err(),
        "the slow handler is still blocked"
    );
    release.send(()).expect("the slow handler waits");
    assert_eq!(take(&mut slow_rx, 10).await.len(), 10);
}

#[tokio::test]
async fn informer_should_relist_and_emit_tombstones_after_falling_behind() {
    relist_and_emit_tombstones_after_falling_behind(InformerOptions::default()).await;
}

#[tokio::test]
async fn compact_informer_should_relist_and_emit_tombstones_after_falling_behind() {
    relist_and_emit_tombstones_after_falling_behind(InformerOptions::default().compact()).await;
}

async fn relist_and_emit_tombstones_after_falling_behind(options: InformerOptions<ConfigMap>) {
    let env = TestEnv::start_with_watch_window(20)
        .await
        .expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "behind").await;
    for name in ["keep", "gone1", "gone2", "changed"] {
        create(&api, name, &[]).await;
    }
    let factory = InformerFactory::new(client.clone());
    let informer = factory.informer_with::<ConfigMap>(options);
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    factory.start();
    synced(&informer).await;
    assert_eq!(take(&mut rx, 4).await.len(), 4);

    // The informer stops reading its watch while more than the server's window happens.
    gate.stall_streams(true);
    api.delete("gone1", &DeleteParams::default())
        .await
        .expect("delete");
    api.delete("gone2", &DeleteParams::default())
        .await
        .expect("delete");
    let mut changed = api.get("changed").await.expect("get");
    changed.data = Some(BTreeMap::from([("k".to_string(), "new".to_string())]));
    api.replace("changed", &PostParams::default(), &changed)
        .await
        .expect("replace");
    for i in 0..25 {
        create(&api, &format!("new{i}"), &[]).await;
    }
    gate.stall_streams(false);

    let server: BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|cm| format!("behind/{}", cm.name_any()))
        .collect();
    let store = informer.store();
    until("the cache matches the server", || {
        keys(&store.list()).into_iter().collect::<BTreeSet<_>>() == server
    })
    .await;
    let metrics = informer.metrics();
    assert!(metrics.relists_total >= 1, "{metrics:?}");
    // The deletes happened while the informer was behind: tombstones, with the last state.
    let mut lines = Vec::new();
    while let Ok(line) = rx.try_recv() {
        lines.push(line);
    }
    for gone in ["gone1", "gone2"] {
        assert!(
            lines.contains(&format!("delete behind/{gone} unknown")),
            "{gone}: a tombstone: {lines:?}"
        );
    }
    let cached = store
        .get(&ObjectKey::namespaced("behind", "changed"))
        .expect("cached");
    assert_eq!(
        cached
            .data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("new")
    );
}

#[tokio::test]
async fn informer_should_renew_watches_without_relisting() {
    let env = TestEnv::start().await.expect("test env");
    let factory = InformerFactory::new(env.client())
        .with_watch_timeout(Duration::from_secs(1), Duration::from_secs(1));
    let api = namespace(&env.client(), "renewed").await;
    let informer = factory.informer::<ConfigMap>();
    let (handler, mut rx) = recorder();
    informer.add_handler(handler);
    factory.start();
    synced(&informer).await;
    until("the watch was renewed twice", || {
        informer.metrics().watch_restarts_total >= 2
    })
    .await;
    create(&api, "a", &[]).await;
    assert_eq!(take(&mut rx, 1).await, ["add renewed/a"]);
    let metrics = informer.metrics();
    assert_eq!(
        (metrics.lists_total, metrics.relists_total),
        (1, 0),
        "{metrics:?}"
    );
    assert_eq!(metrics.watch_errors_total, 0, "{metrics:?}");
    assert!(metrics.events_total >= 1, "{metrics:?}");
}

#[tokio::test]
async fn informer_should_report_list_errors_until_a_list_succeeds() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let factory = InformerFactory::new(gate.client(&env)).with_backoff(WatchBackoff {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(50),
        ..WatchBackoff::default()
    });
    gate.refuse(Some(403));
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    until("an error is reported", || informer.last_error().is_some()).await;
    let error = informer.last_error().unwrap_or_default();
    assert!(
        error.contains("403") && error.contains("configmaps"),
        "{error}"
    );
    let metrics = informer.metrics();
    assert!(
        metrics.watch_errors_total >= 1 && !metrics.synced,
        "{metrics:?}"
    );

    gate.refuse(None);
    synced(&informer).await;
    assert_eq!(
        informer.last_error(),
        None,
        "cleared by the successful list"
    );
}

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
