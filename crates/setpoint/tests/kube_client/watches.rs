//! Watches from a resource version, long backlogs and bursts, and kube-runtime's watcher
//! converging on the objects (with and without streaming lists).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_a_resource_version_should_see_added_modified_deleted_in_order() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let from = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list resourceVersion");

    // These happen before the watch starts: the watch replays them from `from`.
    cms.create(&pp, &configmap("w1", &[], &[("v", "1")]))
        .await
        .expect("create w1");
    cms.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch w1");
    cms.delete("w1", &DeleteParams::default())
        .await
        .expect("delete w1");

    let mut events = cms
        .watch(&WatchParams::default().timeout(30), &from)
        .await
        .expect("watch")
        .boxed();
    // This one happens while the watch is open.
    cms.create(&pp, &configmap("w2", &[], &[("v", "1")]))
        .await
        .expect("create w2");

    let mut seen = Vec::new();
    let mut last_rv = from.parse::<u64>().expect("a decimal resourceVersion");
    while seen.len() < 4 {
        let event = tokio::time::timeout(EVENT_TIMEOUT, events.try_next())
            .await
            .unwrap_or_else(|_| panic!("no watch event in {EVENT_TIMEOUT:?}; saw {seen:?}"))
            .expect("a watch event")
            .unwrap_or_else(|| panic!("the watch ended early; saw {seen:?}"));
        let (kind, cm) = match event {
            WatchEvent::Added(cm) => ("ADDED", cm),
            WatchEvent::Modified(cm) => ("MODIFIED", cm),
            WatchEvent::Deleted(cm) => ("DELETED", cm),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error event: {e:?}"),
        };
        let rv: u64 = cm
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .expect("an event object's resourceVersion");
        assert!(rv > last_rv, "resourceVersions go up: {rv} after {last_rv}");
        last_rv = rv;
        let v = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default();
        seen.push(format!(
            "{kind} {} v={v}",
            cm.metadata.name.unwrap_or_default()
        ));
    }
    assert_eq!(
        seen,
        [
            "ADDED w1 v=1",
            "MODIFIED w1 v=2",
            "DELETED w1 v=2",
            "ADDED w2 v=1"
        ]
    );
}

/// A watch that starts far behind catches up in several chunks (the server hands a watcher at
/// most a few hundred events at a time) and then follows a burst of live writes, which a busy
/// stream sends coalesced: every event arrives once, in order, nothing is lost at a seam.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_should_deliver_a_long_backlog_and_a_burst_in_order() {
    const BACKLOG: usize = 700;
    const BURST: usize = 300;
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let from = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list resourceVersion");
    let create = |prefix: &'static str, range: std::ops::Range<usize>| {
        let cms = cms.clone();
        async move {
            futures::stream::iter(range)
                .map(|i| {
                    let cms = cms.clone();
                    async move {
                        cms.create(
                            &PostParams::default(),
                            &configmap(&format!("{prefix}{i}"), &[], &[("i", &i.to_string())]),
                        )
                        .await
                        .expect("create")
                    }
                })
                .buffer_unordered(16)
                .count()
                .await
        }
    };
    create("b", 0..BACKLOG).await;
    let mut events = cms
        .watch(&WatchParams::default().timeout(60), &from)
        .await
        .expect("watch")
        .boxed();
    let burst = tokio::spawn(create("l", 0..BURST));
    let mut names = std::collections::HashSet::new();
    let mut last_rv = from.parse::<u64>().expect("a decimal resourceVersion");
    while names.len() < BACKLOG + BURST {
        let event = tokio::time::timeout(EVENT_TIMEOUT, events.try_next())
            .await
            .unwrap_or_else(|_| panic!("stuck after {} events", names.len()))
            .expect("a watch event")
            .unwrap_or_else(|| panic!("the watch ended after {} events", names.len()));
        let cm = match event {
            WatchEvent::Added(cm) => cm,
            WatchEvent::Bookmark(_) => continue,
            other => panic!("unexpected event {other:?}"),
        };
        let rv: u64 = cm
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .expect("an event object's resourceVersion");
        assert!(rv > last_rv, "resourceVersions go up: {rv} after {last_rv}");
        last_rv = rv;
        let name = cm.metadata.name.unwrap_or_default();
        assert!(names.insert(name.clone()), "{name} delivered twice");
    }
    assert_eq!(burst.await.expect("the burst ran"), BURST);
    assert!((0..BACKLOG).all(|i| names.contains(&format!("b{i}"))));
    assert!((0..BURST).all(|i| names.contains(&format!("l{i}"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_should_converge_on_the_objects_as_they_change() {
    // The default: a paged list, then a watch from its resourceVersion, with bookmarks.
    watcher_converges(watcher::Config::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_with_streaming_lists_should_converge_too() {
    // A watch with sendInitialEvents=true: the initial objects, then a bookmark marking their end.
    watcher_converges(watcher::Config::default().streaming_lists()).await;
}

/// Runs a reflector with `config` over a namespace whose ConfigMaps are created before it
/// starts and created, patched and deleted while it runs; its store must end up as the server.
async fn watcher_converges(config: watcher::Config) {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "watched"}})).expect("namespace"),
        )
        .await
        .expect("create namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client, "watched");
    let pp = PostParams::default();
    let mut expected = BTreeMap::new();
    for i in 0..5 {
        let name = format!("a{i}");
        cms.create(&pp, &configmap(&name, &[], &[("v", "0")]))
            .await
            .expect("create before the watcher");
        expected.insert(name, "0".to_owned());
    }

    let (reader, writer) = reflector::store::<ConfigMap>();
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = events.clone();
    let driver = tokio::spawn(
        reflector::reflector(writer, watcher(cms.clone(), config)).for_each(move |event| {
            let line = match event {
                Ok(watcher::Event::Init) => "Init".to_owned(),
                Ok(watcher::Event::InitApply(_)) => "InitApply".to_owned(),
                Ok(watcher::Event::InitDone) => "InitDone".to_owned(),
                Ok(watcher::Event::Apply(_)) => "Apply".to_owned(),
                Ok(watcher::Event::Delete(_)) => "Delete".to_owned(),
                Err(e) => format!("error: {e}"),
            };
            log.lock().expect("the event log").push(line);
            futures::future::ready(())
        }),
    );
    tokio::time::timeout(EVENT_TIMEOUT, reader.wait_until_ready())
        .await
        .expect("the watcher's initial list in time")
        .expect("the store becomes ready");
    converge(&reader, &expected, &events).await;
    {
        let events = events.lock().expect("the event log");
        assert_eq!(
            events.first().map(String::as_str),
            Some("Init"),
            "{events:?}"
        );
        assert_eq!(
            events.iter().filter(|e| *e == "InitApply").count(),
            5,
            "{events:?}"
        );
    }

    for i in 0..5 {
        let name = format!("b{i}");
        cms.create(&pp, &configmap(&name, &[], &[("v", "0")]))
            .await
            .expect("create while watching");
        expected.insert(name, "0".to_owned());
    }
    for name in ["a0", "a1", "b2"] {
        for v in 1..=3 {
            cms.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"v": v.to_string()}})),
            )
            .await
            .expect("patch while watching");
        }
        expected.insert(name.to_owned(), "3".to_owned());
    }
    for name in ["a3", "a4", "b4"] {
        cms.delete(name, &DeleteParams::default())
            .await
            .expect("delete while watching");
        expected.remove(name);
    }
    converge(&reader, &expected, &events).await;
    let errors: Vec<String> = events
        .lock()
        .expect("the event log")
        .iter()
        .filter(|e| e.starts_with("error"))
        .cloned()
        .collect();
    assert!(errors.is_empty(), "the watcher saw errors: {errors:?}");
    driver.abort();
}

/// Waits until the reflector's store holds exactly `expected` (name to `data.v`).
async fn converge(
    reader: &reflector::Store<ConfigMap>,
    expected: &BTreeMap<String, String>,
    events: &Mutex<Vec<String>>,
) {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        let state: BTreeMap<String, String> = reader
            .state()
            .iter()
            .map(|cm| {
                let v = cm.data.as_ref().and_then(|d| d.get("v")).cloned();
                (
                    cm.metadata.name.clone().unwrap_or_default(),
                    v.unwrap_or_default(),
                )
            })
            .collect();
        if &state == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the watcher did not converge in {EVENT_TIMEOUT:?}:\n  have {state:?}\n  want \
             {expected:?}\n  events {:?}",
            events.lock().expect("the event log")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
