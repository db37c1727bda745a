//! The API server driven by the `kube` crate, a second real client beside `kubectl`, configured
//! from the server's admin kubeconfig: typed create/get/list with label selectors and paging,
//! the three patch types and their errors, optimistic concurrency, watch from a
//! resourceVersion, `kube::runtime::watcher` (list then watch, and streaming lists) converging
//! on changing objects, metadata-only reads, server-side apply refused with 415 for now,
//! delete's two kinds of answer, and the `status` and `scale` subresources. Each test's server
//! runs the API alone, without the built-in loops, which would write to the same objects.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::Status;
use kube::runtime::{reflector, watcher};
use serde_json::{json, Value};

/// How long a watch or watcher may take to show what the test waits for.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmaps_should_be_created_read_and_listed_by_label_and_in_pages() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    for i in 0..7 {
        let app = if i < 4 { "a" } else { "b" };
        let created = cms
            .create(
                &pp,
                &configmap(&format!("cm{i}"), &[("app", app)], &[("i", &i.to_string())]),
            )
            .await
            .expect("create");
        assert_eq!(created.metadata.name.as_deref(), Some(&*format!("cm{i}")));
        assert!(created.metadata.uid.is_some_and(|u| !u.is_empty()));
        assert!(created.metadata.creation_timestamp.is_some());
    }

    let got = cms.get("cm5").await.expect("get");
    assert_eq!(got.data, Some(data(&[("i", "5")])));
    assert_eq!(got.metadata.labels, Some(data(&[("app", "b")])));
    assert!(cms.get_opt("nope").await.expect("get_opt").is_none());
    let missing = api_error(cms.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    let dup = api_error(cms.create(&pp, &configmap("cm0", &[], &[("x", "y")])).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n.starts_with("cm"))
            .collect()
    };
    let a = cms
        .list(&ListParams::default().labels("app=a"))
        .await
        .expect("list app=a");
    assert_eq!(names(a), ["cm0", "cm1", "cm2", "cm3"]);
    let not_a = cms
        .list(&ListParams::default().labels("app!=a,app"))
        .await
        .expect("list app!=a");
    assert_eq!(names(not_a), ["cm4", "cm5", "cm6"]);
    let both = cms
        .list(&ListParams::default().labels("app in (a,b)"))
        .await
        .expect("list app in (a,b)");
    assert_eq!(names(both).len(), 7);
    let bad = api_error(cms.list(&ListParams::default().labels("app in (")).await);
    assert_eq!(bad.code, 400, "{bad:?}");

    // Pages of 3 with continue tokens, all at the first page's resourceVersion.
    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    let mut first_rv = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().labels("app").limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = cms.list(&lp).await.expect("a page");
        pages += 1;
        assert!(
            page.items.len() <= 3,
            "{} items in a page of 3",
            page.items.len()
        );
        let rv = page.metadata.resource_version.clone();
        assert!(rv.is_some(), "a page without a resourceVersion");
        if first_rv.is_none() {
            first_rv = rv.clone();
            // A write between pages must not show up in later pages.
            cms.create(&pp, &configmap("cm9", &[("app", "c")], &[]))
                .await
                .expect("create between pages");
        }
        assert_eq!(rv, first_rv, "pages of one list are one snapshot");
        token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        if token.is_some() {
            assert_eq!(page.items.len(), 3, "a page before the last is full");
        }
        paged.extend(names(page));
        if token.is_none() {
            break;
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(
        paged,
        ["cm0", "cm1", "cm2", "cm3", "cm4", "cm5", "cm6"],
        "pages in name order, each object once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_should_take_merge_json_and_strategic_merge_patches() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    let created = deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    let pp = PatchParams::default();

    let merged = deploys
        .patch(
            "web",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"labels": {"tier": "front"}}, "spec": {"replicas": 3}}),
            ),
        )
        .await
        .expect("merge patch");
    assert_eq!(spec(&merged)["replicas"], 3);
    assert_eq!(
        merged.metadata.labels.as_ref().and_then(|l| l.get("tier")),
        Some(&"front".to_owned())
    );
    assert_eq!(merged.metadata.generation, Some(2));

    let json_patch = |ops: Value| Patch::Json::<()>(serde_json::from_value(ops).expect("ops"));
    let patched = deploys
        .patch(
            "web",
            &pp,
            &json_patch(json!([
                {"op": "test", "path": "/spec/replicas", "value": 3},
                {"op": "replace", "path": "/spec/replicas", "value": 4},
                {"op": "add", "path": "/metadata/annotations", "value": {"note": "json"}},
            ])),
        )
        .await
        .expect("json patch");
    assert_eq!(spec(&patched)["replicas"], 4);
    assert_eq!(
        patched
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("note")),
        Some(&"json".to_owned())
    );

    let failed_test = api_error(
        deploys
            .patch(
                "web",
                &pp,
                &json_patch(json!([
                    {"op": "test", "path": "/spec/replicas", "value": 99},
                    {"op": "replace", "path": "/spec/replicas", "value": 7},
                ])),
            )
            .await,
    );
    assert_eq!(failed_test.code, 422, "{failed_test:?}");
    assert_eq!(failed_test.reason, "Invalid", "{failed_test:?}");
    assert_eq!(
        spec(&deploys.get("web").await.expect("get"))["replicas"],
        4,
        "a failed test op applies nothing"
    );

    // Strategic merge: containers merge by name, env by name; the sidecar is kept.
    let strategic = deploys
        .patch(
            "web",
            &pp,
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "c", "image": "nginx:1.26", "env": [{"name": "B", "value": "2"}]}
            ]}}}})),
        )
        .await
        .expect("strategic merge patch");
    let containers = spec(&strategic)["template"]["spec"]["containers"].clone();
    assert_eq!(containers.as_array().map(Vec::len), Some(2), "{containers}");
    assert_eq!(containers[0]["name"], "c");
    assert_eq!(containers[0]["image"], "nginx:1.26");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]),
        "env entries merged by name"
    );
    assert_eq!(containers[1]["name"], "sidecar");
    assert_eq!(containers[1]["image"], "busybox:1.36");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_with_a_stale_resource_version_should_conflict() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let first = cms
        .create(&pp, &configmap("c", &[], &[("v", "1")]))
        .await
        .expect("create");

    let mut next = first.clone();
    next.data = Some(data(&[("v", "2")]));
    let replaced = cms.replace("c", &pp, &next).await.expect("replace");
    assert_eq!(replaced.data, Some(data(&[("v", "2")])));
    assert_ne!(
        replaced.metadata.resource_version,
        first.metadata.resource_version
    );

    let mut stale = first.clone();
    stale.data = Some(data(&[("v", "3")]));
    let conflict = api_error(cms.replace("c", &pp, &stale).await);
    assert_eq!(conflict.code, 409, "{conflict:?}");
    assert_eq!(conflict.reason, "Conflict", "{conflict:?}");
    assert!(
        conflict.message.contains("modified"),
        "the message says the object was modified: {conflict:?}"
    );
    let details = conflict.details.expect("conflict details");
    assert_eq!(details.name, "c");
    assert_eq!(details.kind, "configmaps");
    assert_eq!(
        cms.get("c").await.expect("get").data,
        Some(data(&[("v", "2")])),
        "the stale replace changed nothing"
    );

    // The deployment's replace conflicts the same way.
    let deploys: Api<Deployment> = Api::namespaced(cms.clone().into_client(), "default");
    let d = deploys
        .create(&pp, &deployment("web"))
        .await
        .expect("create");
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("patch");
    let conflict = api_error(deploys.replace("web", &pp, &d).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_should_be_refused_with_415_for_now() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let applied = cms
        .patch(
            "ssa",
            &PatchParams::apply("kube-client-test"),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "ssa"}, "data": {"a": "1"}
            })),
        )
        .await;
    let refused = api_error(applied);
    assert_eq!(refused.code, 415, "{refused:?}");
    assert_eq!(refused.reason, "UnsupportedMediaType", "{refused:?}");
    assert!(
        refused.message.contains("server-side apply"),
        "the message names server-side apply: {refused:?}"
    );
    assert!(cms.get_opt("ssa").await.expect("get").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_should_answer_with_the_pod_and_with_a_status_for_a_configmap() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    }))
    .expect("a pod");
    let created = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let uid = created.metadata.uid.clone();
    // Either side will do: the Pod itself, or a Status naming it.
    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete pod")
        .either(
            |deleted| {
                eprintln!("delete pod: answered with the Pod");
                assert_eq!(deleted.metadata.name.as_deref(), Some("p"));
                assert_eq!(deleted.metadata.uid, uid);
            },
            |status| {
                eprintln!("delete pod: answered with a Status");
                assert_success(&status);
                assert_eq!(status.details.map(|d| d.name), Some("p".to_owned()));
            },
        );

    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &configmap("c", &[], &[("a", "1")]))
        .await
        .expect("create configmap");
    let status = cms
        .delete("c", &DeleteParams::default())
        .await
        .expect("delete configmap")
        .either(
            |cm| panic!("deleting a ConfigMap answered with the object: {cm:?}"),
            |status| status,
        );
    assert_success(&status);
    let details = status.details.expect("status details");
    assert_eq!(details.name, "c");
    assert_eq!(details.kind, "configmaps");
    assert!(cms.get_opt("c").await.expect("get").is_none());
    let gone = api_error(cms.delete("c", &DeleteParams::default()).await);
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_status_should_change_status_but_not_spec_nor_generation() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let patched = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "spec": {"replicas": 9},
                "status": {"replicas": 2, "readyReplicas": 1, "observedGeneration": 1}
            })),
        )
        .await
        .expect("patch_status");
    let status = serde_json::to_value(&patched.status).expect("status");
    assert_eq!(status["replicas"], 2, "{status}");
    assert_eq!(status["readyReplicas"], 1, "{status}");
    assert_eq!(status["observedGeneration"], 1, "{status}");
    assert_eq!(
        spec(&patched)["replicas"],
        2,
        "the status write left spec alone"
    );
    assert_eq!(patched.metadata.generation, Some(1));
    let read = deploys.get_status("web").await.expect("get_status");
    assert_eq!(serde_json::to_value(&read.status).expect("status"), status);

    // The other way round: a write of the main resource changes spec (and generation), and
    // ignores status.
    let main = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}, "status": {"replicas": 7}})),
        )
        .await
        .expect("patch");
    assert_eq!(spec(&main)["replicas"], 4);
    assert_eq!(main.metadata.generation, Some(2));
    assert_eq!(
        serde_json::to_value(&main.status).expect("status")["replicas"],
        2,
        "the main resource's write left status alone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_subresource_should_read_and_set_the_replicas() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let deploys: Api<Deployment> = Api::namespaced(client, "default");
    deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let scale = deploys.get_scale("web").await.expect("get_scale");
    assert_eq!(scale.metadata.name.as_deref(), Some("web"));
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let status = scale.status.expect("scale status");
    assert_eq!(status.selector.as_deref(), Some("app=web"));

    let scaled = deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("patch_scale");
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(5));
    let d = deploys.get("web").await.expect("get");
    assert_eq!(spec(&d)["replicas"], 5);
    assert_eq!(d.metadata.generation, Some(2), "scaling changes spec");
    assert_eq!(
        d.metadata.resource_version, scaled.metadata.resource_version,
        "the scale answer carries the deployment's new resourceVersion"
    );
    let stale = api_error(
        deploys
            .patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 6}}),
                ),
            )
            .await,
    );
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_reads_should_return_partial_object_metadata() {
    let server = Server::start_api_only();
    let client = server.kube_client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(
            &PostParams::default(),
            &configmap("m", &[("app", "a")], &[("a", "1")]),
        )
        .await
        .expect("create");
    let meta = cms.get_metadata("m").await.expect("get_metadata");
    assert_eq!(
        meta.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(meta.metadata.uid, created.metadata.uid);
    assert_eq!(meta.metadata.labels, created.metadata.labels);
    let list = cms
        .list_metadata(&ListParams::default().labels("app=a"))
        .await
        .expect("list_metadata");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["m"]);
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

/// The API error of a call that should have failed with one.
#[track_caller]
fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        Err(e) => panic!("expected an API error, got {e:?}"),
        Ok(v) => panic!("expected an API error, got success: {v:?}"),
    }
}

fn assert_success(status: &Status) {
    assert!(status.is_success(), "{status:?}");
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn configmap(name: &str, labels: &[(&str, &str)], pairs: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: (!labels.is_empty()).then(|| data(labels)),
            ..ObjectMeta::default()
        },
        data: Some(data(pairs)),
        ..ConfigMap::default()
    }
}

/// A two-replica Deployment with a main container (one env var) and a sidecar.
fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [
                    {"name": "c", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}]},
                    {"name": "sidecar", "image": "busybox:1.36"}
                ]}
            }
        }
    }))
    .expect("a deployment")
}

/// A deployment's spec as JSON, for terse assertions.
fn spec(d: &Deployment) -> Value {
    serde_json::to_value(&d.spec).expect("spec")
}
