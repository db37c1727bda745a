//! The watcher against a real in-process API server: lists (paged and streaming), watch
//! events, watch renewal without relisting, relists after `410 Gone` (as an HTTP answer and as
//! an `ERROR` event), errors yielded without ending the stream, metadata-only watches.

use crate::fixtures;
use crate::gated;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fixtures::namespace;
use futures::StreamExt;
use gated::Gate;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Api, ResourceExt};
use setpoint_runtime::{
    metadata_watcher, watcher, InitialList, WatchBackoff, WatchError, WatcherConfig, WatcherEvent,
};
use setpoint_testenv::TestEnv;
use tokio::sync::mpsc;

type Item<K> = Result<WatcherEvent<K>, WatchError>;

async fn create(api: &Api<ConfigMap>, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    fixtures::create_configmap(api, name, labels, None).await
}

/// Polls `stream` on its own task, forwarding every item: the watcher keeps running while the
/// test does other things.
fn pump<K: Send + 'static>(
    stream: impl futures::Stream<Item = Item<K>> + Send + 'static,
) -> mpsc::UnboundedReceiver<Item<K>> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    rx
}

async fn next<K>(rx: &mut mpsc::UnboundedReceiver<Item<K>>) -> Item<K> {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("an event within 30 s")
        .expect("the watcher never ends")
}

async fn next_ok<K: std::fmt::Debug>(rx: &mut mpsc::UnboundedReceiver<Item<K>>) -> WatcherEvent<K> {
    match next(rx).await {
        Ok(event) => event,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn names_of<K: kube::Resource>(objects: &[K]) -> BTreeSet<String> {
    objects
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

fn listed<K: kube::Resource>(event: WatcherEvent<K>) -> (BTreeSet<String>, String) {
    match event {
        WatcherEvent::Listed {
            objects,
            resource_version,
        } => (names_of(&objects), resource_version),
        WatcherEvent::Applied(o) => panic!("expected a list, got applied {:?}", o.meta().name),
        WatcherEvent::Deleted(o) => panic!("expected a list, got deleted {:?}", o.meta().name),
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

async fn server_names(api: &Api<ConfigMap>) -> BTreeSet<String> {
    let list = api.list(&ListParams::default()).await.expect("list");
    names_of(&list.items)
}

fn config(initial_list: InitialList) -> WatcherConfig {
    WatcherConfig {
        initial_list,
        ..WatcherConfig::default()
    }
}

async fn lists_then_sees_changes(initial_list: InitialList) {
    let env = TestEnv::start().await.expect("test env");
    let api = namespace(&env.client(), "w").await;
    for name in ["a", "b", "c"] {
        create(&api, name, &[]).await;
    }
    let mut rx = pump(watcher(api.clone(), config(initial_list)));
    let (names, rv) = listed(next_ok(&mut rx).await);
    assert_eq!(names, set(&["a", "b", "c"]));
    assert!(!rv.is_empty());

    create(&api, "d", &[]).await;
    match next_ok(&mut rx).await {
        WatcherEvent::Applied(cm) => assert_eq!(cm.name_any(), "d"),
        other => panic!("expected ADDED d, got {other:?}"),
    }
    let mut d = api.get("d").await.expect("get d");
    d.data = Some(BTreeMap::from([("k".to_string(), "changed".to_string())]));
    api.replace("d", &PostParams::default(), &d)
        .await
        .expect("replace d");
    match next_ok(&mut rx).await {
        WatcherEvent::Applied(cm) => {
            assert_eq!(
                cm.data.and_then(|d| d.get("k").cloned()).as_deref(),
                Some("changed")
            )
        }
        other => panic!("expected MODIFIED d, got {other:?}"),
    }
    api.delete("d", &DeleteParams::default())
        .await
        .expect("delete d");
    match next_ok(&mut rx).await {
        WatcherEvent::Deleted(cm) => assert_eq!(cm.name_any(), "d"),
        other => panic!("expected DELETED d, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_should_page_list_then_see_added_modified_deleted() {
    lists_then_sees_changes(InitialList::List).await;
}

#[tokio::test]
async fn watcher_should_stream_list_then_see_added_modified_deleted() {
    lists_then_sees_changes(InitialList::Stream).await;
}

#[tokio::test]
async fn watcher_should_read_a_paged_list_page_by_page() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "paged").await;
    for i in 0..7 {
        create(&api, &format!("cm{i}"), &[]).await;
    }
    let config = WatcherConfig {
        page_size: Some(2),
        ..config(InitialList::List)
    };
    let mut rx = pump(watcher(api.clone(), config));
    let (names, _) = listed(next_ok(&mut rx).await);
    assert_eq!(names.len(), 7);
    let pages: Vec<_> = gate
        .requests()
        .into_iter()
        .filter(|r| {
            r.starts_with("GET ") && r.contains("/configmaps?") && !r.contains("watch=true")
        })
        .collect();
    assert_eq!(pages.len(), 4, "7 objects in pages of 2: {pages:?}");
    assert!(pages[1..].iter().all(|r| r.contains("continue=")));
}

#[tokio::test]
async fn watcher_should_first_try_a_consistent_streaming_list() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "streamed").await;
    create(&api, "a", &[]).await;
    let mut rx = pump(watcher(api.clone(), config(InitialList::Auto)));
    // A list reflects the write just made, however the server answered the streaming list.
    assert_eq!(listed(next_ok(&mut rx).await).0, set(&["a"]));
    let first = gate
        .requests()
        .into_iter()
        .find(|r| r.starts_with("GET /api/v1/namespaces/streamed/configmaps"))
        .expect("a request for the collection");
    assert!(
        first.contains("watch=true")
            && first.contains("sendInitialEvents=true")
            && first.contains("resourceVersionMatch=NotOlderThan")
            && first.ends_with("resourceVersion="),
        "a streaming list without resource version: {first}"
    );
}

#[tokio::test]
async fn watcher_should_relist_by_streaming_after_410() {
    let env = TestEnv::start_with_watch_window(20)
        .await
        .expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "restream").await;
    create(&api, "a", &[]).await;
    let config = WatcherConfig {
        watch_timeout: (Duration::from_secs(1), Duration::from_secs(1)),
        ..config(InitialList::Auto)
    };
    let mut rx = pump(watcher(api.clone(), config));
    let (_, list_rv) = listed(next_ok(&mut rx).await);
    gate.hold_watches(true);
    gate.until("a watch is held", |g| g.held() == 1).await;
    let before = gate.requests().len();
    for i in 0..25 {
        create(&api, &format!("new{i}"), &[]).await;
    }
    gate.hold_watches(false);
    let (mut names, _) = listed(next_ok(&mut rx).await);
    let requests = gate.requests();
    // A list "not older than" what was seen may trail the latest writes; the watch that
    // follows it brings the rest.
    let server = server_names(&api).await;
    while names != server {
        match next_ok(&mut rx).await {
            WatcherEvent::Applied(cm) => names.insert(cm.name_any()),
            other => panic!("expected the writes the list missed, got {other:?}"),
        };
    }
    let after: Vec<_> = requests[before..]
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/namespaces/restream/configmaps"))
        .cloned()
        .collect();
    let relist = after
        .iter()
        .find(|r| r.contains("sendInitialEvents=true"))
        .unwrap_or_else(|| panic!("a streaming relist: {after:?}"));
    assert!(
        relist.ends_with(&format!("resourceVersion={list_rv}")),
        "not older than what was seen: {relist}"
    );
    assert!(
        after.iter().all(|r| r.contains("watch=true")),
        "no paged list: {after:?}"
    );
}

#[tokio::test]
async fn watcher_should_fall_back_to_a_paged_list_when_streaming_is_refused() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "fallback").await;
    create(&api, "a", &[]).await;
    gate.refuse_streaming(true);
    let mut rx = pump(watcher(api.clone(), config(InitialList::Auto)));
    // No error is yielded for the refused streaming list: the paged list follows at once.
    assert_eq!(listed(next_ok(&mut rx).await).0, set(&["a"]));
    create(&api, "b", &[]).await;
    assert!(matches!(next_ok(&mut rx).await, WatcherEvent::Applied(_)));
    let requests = gate.requests();
    assert!(requests
        .iter()
        .any(|r| r.starts_with("GET ") && r.contains("/configmaps?") && !r.contains("watch=true")));
}

#[tokio::test]
async fn watcher_should_renew_an_ended_watch_without_relisting() {
    let env = TestEnv::start().await.expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "renew").await;
    create(&api, "a", &[]).await;
    let config = WatcherConfig {
        watch_timeout: (Duration::from_secs(1), Duration::from_secs(1)),
        ..config(InitialList::List)
    };
    let mut rx = pump(watcher(api.clone(), config));
    let (_, list_rv) = listed(next_ok(&mut rx).await);
    let watches = |gate: &Gate| {
        gate.requests()
            .iter()
            .filter(|r| r.contains("/namespaces/renew/configmaps") && r.contains("watch=true"))
            .count()
    };
    // The server ends each watch after a second; wait for two renewals.
    gate.until("the watch was renewed twice", |g| watches(g) >= 3)
        .await;
    let requests = gate.requests();
    let lists = requests
        .iter()
        .filter(|r| {
            r.starts_with("GET /api/v1/namespaces/renew/configmaps?") && !r.contains("watch=true")
        })
        .count();
    assert_eq!(lists, 1, "no relist: {requests:?}");
    let watch_requests: Vec<_> = requests
        .iter()
        .filter(|r| r.contains("watch=true"))
        .collect();
    assert!(
        watch_requests
            .iter()
            .all(|w| w.ends_with(&format!("resourceVersion={list_rv}"))),
        "each renewal resumes from the list's resource version: {watch_requests:?}"
    );
    // The renewed watch delivers changes, and nothing was relisted meanwhile.
    create(&api, "b", &[]).await;
    match next_ok(&mut rx).await {
        WatcherEvent::Applied(cm) => assert_eq!(cm.name_any(), "b"),
        other => panic!("expected ADDED b on a renewed watch, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_should_relist_when_the_watch_request_is_answered_410() {
    let env = TestEnv::start_with_watch_window(20)
        .await
        .expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "gone").await;
    for name in ["a", "b", "c"] {
        create(&api, name, &[]).await;
    }
    let config = WatcherConfig {
        watch_timeout: (Duration::from_secs(1), Duration::from_secs(1)),
        ..config(InitialList::List)
    };
    let mut rx = pump(watcher(api.clone(), config));
    assert_eq!(listed(next_ok(&mut rx).await).0, set(&["a", "b", "c"]));
    // Hold the renewal of the watch while the server's window moves on.
    gate.hold_watches(true);
    gate.until("a watch renewal is held", |g| g.held() == 1)
        .await;
    api.delete("b", &DeleteParams::default())
        .await
        .expect("delete b");
    for i in 0..25 {
        create(&api, &format!("new{i}"), &[]).await;
    }
    gate.hold_watches(false);
    let (names, _) = listed(next_ok(&mut rx).await);
    assert_eq!(names, server_names(&api).await);
    assert!(!names.contains("b"));
    assert_eq!(names.len(), 27);
}

#[tokio::test]
async fn watcher_should_relist_when_the_stream_reports_410() {
    let env = TestEnv::start_with_watch_window(20)
        .await
        .expect("test env");
    let gate = Gate::new();
    let client = gate.client(&env);
    let api = namespace(&client, "expired").await;
    for name in ["a", "b", "c"] {
        create(&api, name, &[]).await;
    }
    gate.stall_streams(true);
    let mut rx = pump(watcher(api.clone(), config(InitialList::List)));
    assert_eq!(listed(next_ok(&mut rx).await).0, set(&["a", "b", "c"]));
    // The watch is open but not read: the server's cursor stays at the list.
    api.delete("c", &DeleteParams::default())
        .await
        .expect("delete c");
    for i in 0..25 {
        create(&api, &format!("new{i}"), &[]).await;
    }
    gate.stall_streams(false);
    let event = loop {
        // Anything the stream delivered before the server noticed is superseded by the list.
        match next_ok(&mut rx).await {
            WatcherEvent::Applied(_) | WatcherEvent::Deleted(_) => continue,
            listed_event => break listed_event,
        }
    };
    let (names, _) = listed(event);
    assert_eq!(names, server_names(&api).await);
    assert_eq!(names.len(), 27);
}

#[tokio::test]
async fn watcher_should_yield_errors_and_keep_trying() {
    let env = TestEnv::start().await.expect("test env");
    let missing = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(env.client().kube().clone(), &missing);
    let config = WatcherConfig {
        backoff: WatchBackoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(20),
            ..WatchBackoff::default()
        },
        ..config(InitialList::List)
    };
    let mut rx = pump(watcher(api, config));
    for _ in 0..3 {
        match next(&mut rx).await {
            Err(e) => {
                assert_eq!(e.status_code(), Some(404), "{e}");
                assert!(e.to_string().contains("widgets"), "names the resource: {e}");
                assert!(e.to_string().contains("404"), "says the code: {e}");
            }
            Ok(event) => panic!("expected an error, got {event:?}"),
        }
    }
}

#[tokio::test]
async fn metadata_watcher_should_yield_partial_object_metadata() {
    let env = TestEnv::start().await.expect("test env");
    let api = namespace(&env.client(), "meta").await;
    create(&api, "a", &[("app", "web")]).await;
    let mut rx = pump(metadata_watcher(api.clone(), WatcherConfig::default()));
    match next_ok(&mut rx).await {
        WatcherEvent::Listed { objects, .. } => {
            assert_eq!(objects.len(), 1);
            assert_eq!(objects[0].name_any(), "a");
            assert_eq!(
                objects[0].labels().get("app").map(String::as_str),
                Some("web")
            );
        }
        other => panic!("expected a list, got {other:?}"),
    }
    create(&api, "b", &[]).await;
    match next_ok(&mut rx).await {
        WatcherEvent::Applied(meta) => assert_eq!(meta.name_any(), "b"),
        other => panic!("expected ADDED b, got {other:?}"),
    }
}
