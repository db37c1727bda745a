//! The cache's behaviour, checked in every form: decoded, compact decoding on every read, and
//! compact with a small recent cache.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec};
use kube::api::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::*;

/// Every form a cache can take.
fn forms<K: Serialize + DeserializeOwned>() -> [CacheForm<K>; 3] {
    [
        CacheForm::decoded(),
        CacheForm::compact_with_recent(0),
        CacheForm::compact_with_recent(4),
    ]
}

fn cm(ns: Option<&str>, name: &str, rv: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            namespace: ns.map(String::from),
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        ..Default::default()
    })
}

fn pod(ns: &str, name: &str, node: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn by_node() -> IndexFn<Pod> {
    Arc::new(|p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .into_iter()
            .collect()
    })
}

fn names<K: Resource>(objects: &[Arc<K>]) -> Vec<String> {
    objects
        .iter()
        .map(|o| ObjectKey::of(o.as_ref()).to_string())
        .collect()
}

fn keys<K: Resource>(objects: impl IntoIterator<Item = Arc<K>>) -> Vec<String> {
    objects
        .into_iter()
        .map(|o| ObjectKey::of(o.as_ref()).to_string())
        .collect()
}

#[test]
fn store_should_get_by_key_and_list_by_namespace() {
    for form in forms() {
        let store = ObjectCache::with_form(&form);
        for (ns, name) in [("b", "x"), ("a", "y"), ("a", "x"), ("ab", "z")] {
            store.apply(cm(Some(ns), name, "1", &[]));
        }
        store.apply(cm(None, "cluster", "1", &[]));
        assert_eq!(store.len(), 5, "{form:?}");
        assert_eq!(store.is_compact(), form.is_compact());
        assert_eq!(
            store.get(&ObjectKey::namespaced("a", "y")).as_deref(),
            Some(&*cm(Some("a"), "y", "1", &[])),
            "{form:?}"
        );
        assert!(store.get(&ObjectKey::namespaced("a", "z")).is_none());
        assert_eq!(names(&store.list_namespace("a")), ["a/x", "a/y"]);
        assert_eq!(names(&store.list_namespace("ab")), ["ab/z"]);
        assert_eq!(names(&store.list_namespace("c")), Vec::<String>::new());
        assert_eq!(
            names(&store.list()),
            ["cluster", "a/x", "a/y", "ab/z", "b/x"],
            "{form:?}"
        );
    }
}

#[test]
fn store_should_return_the_latest_version_after_updates_and_deletes() {
    for form in forms() {
        let store = ObjectCache::with_form(&form);
        store.apply(cm(Some("a"), "x", "1", &[("v", "1")]));
        let key = ObjectKey::namespaced("a", "x");
        // Read it (now kept decoded, where the form keeps any), then change it.
        assert!(store.get(&key).is_some());
        let replaced = store.apply(cm(Some("a"), "x", "2", &[("v", "2")]));
        assert_eq!(
            replaced.as_deref(),
            Some(&*cm(Some("a"), "x", "1", &[("v", "1")]))
        );
        for _ in 0..2 {
            let got = store.get(&key).expect("cached");
            assert_eq!(
                got.metadata.resource_version.as_deref(),
                Some("2"),
                "{form:?}"
            );
        }
        let v1 = LabelSelector::parse("v=1").expect("valid selector");
        assert!(store.list_selected(None, &v1).is_empty(), "{form:?}");
        assert!(store.remove(&key, Some("3".into())));
        assert!(!store.remove(&key, None), "already gone");
        assert!(store.get(&key).is_none(), "{form:?}");
        assert_eq!(store.resource_version().as_deref(), Some("3"));
    }
}

#[test]
fn store_should_list_by_label_selector_in_a_namespace_or_everywhere() {
    for form in forms() {
        let store = ObjectCache::with_form(&form);
        store.apply(cm(Some("a"), "web", "1", &[("app", "web")]));
        store.apply(cm(Some("a"), "db", "1", &[("app", "db")]));
        store.apply(cm(Some("b"), "web", "1", &[("app", "web"), ("tier", "1")]));
        store.apply(cm(Some("b"), "none", "1", &[]));
        let web = LabelSelector::parse("app=web").expect("valid selector");
        assert_eq!(names(&store.list_selected(None, &web)), ["a/web", "b/web"]);
        assert_eq!(names(&store.list_selected(Some("b"), &web)), ["b/web"]);
        let not_web = LabelSelector::parse("app!=web").expect("valid selector");
        assert_eq!(
            names(&store.list_selected(None, &not_web)),
            ["a/db", "b/none"],
            "{form:?}"
        );
        let tier = LabelSelector::parse("tier in (1,2),app").expect("valid selector");
        assert_eq!(names(&store.list_selected(None, &tier)), ["b/web"]);
    }
}

#[test]
fn store_should_keep_a_custom_index_current_through_updates_and_deletes() {
    for form in forms() {
        let store = ObjectCache::with_form(&form);
        store.add_index("node", by_node());
        store.apply(pod("ns", "p1", "n1"));
        store.apply(pod("ns", "p2", "n1"));
        store.apply(pod("ns", "p3", "n2"));
        assert_eq!(
            names(&store.by_index("node", "n1").expect("index exists")),
            ["ns/p1", "ns/p2"]
        );
        // p2 moves to n2, p1 goes.
        store.apply(pod("ns", "p2", "n2"));
        store.remove(&ObjectKey::namespaced("ns", "p1"), None);
        assert_eq!(
            names(&store.by_index("node", "n1").expect("index exists")),
            Vec::<String>::new(),
            "{form:?}"
        );
        assert_eq!(
            names(&store.by_index("node", "n2").expect("index exists")),
            ["ns/p2", "ns/p3"]
        );
        store.check_invariants();
    }
}

#[test]
fn store_should_index_objects_cached_before_the_index_was_added() {
    for form in forms() {
        let store = ObjectCache::with_form(&form);
        store.apply(pod("ns", "p1", "n1"));
        store.apply(pod("ns", "p2", "n2"));
        assert_eq!(
            store.by_index("node", "n1").map(|v| v.len()),
            Err(CacheError::UnknownIndex("node".into()))
        );
        store.add_index("node", by_node());
        assert_eq!(
            names(&store.by_index("node", "n2").expect("index exists")),
            ["ns/p2"],
            "{form:?}"
        );
        store.check_invariants();
    }
}

#[test]
fn store_should_replace_content_and_indexes_and_report_what_it_replaced() {
    for form in forms() {
        let store = ObjectCache::with_form(&form);
        store.add_index("node", by_node());
        store.apply(pod("ns", "old", "n1"));
        store.apply(pod("ns", "kept", "n2"));
        let mut moved = (*pod("ns", "kept", "n1")).clone();
        moved.metadata.resource_version = Some("2".into());
        let replaced = store.replace(vec![pod("ns", "new", "n1"), Arc::new(moved)], "7".into());
        assert_eq!(keys(replaced.vanished), ["ns/old"], "{form:?}");
        let listed: Vec<_> = replaced
            .listed
            .iter()
            .map(|(new, old)| {
                let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
                (
                    ObjectKey::of(new.as_ref()).to_string(),
                    old.as_deref().and_then(node),
                    node(new),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("ns/kept".into(), Some("n2".into()), Some("n1".into())),
                ("ns/new".into(), None, Some("n1".into())),
            ],
            "{form:?}"
        );
        assert_eq!(names(&store.list()), ["ns/kept", "ns/new"]);
        assert_eq!(
            names(&store.by_index("node", "n1").expect("index exists")),
            ["ns/kept", "ns/new"]
        );
        assert!(store
            .by_index("node", "n2")
            .expect("index exists")
            .is_empty());
        assert_eq!(store.resource_version().as_deref(), Some("7"));
        assert!(store.is_synced());
        store.check_invariants();
    }
}

#[test]
fn store_should_keep_the_cached_arc_when_a_relisted_object_is_unchanged() {
    let store = ObjectCache::new();
    let same = cm(Some("ns"), "same", "5", &[]);
    let changed = cm(Some("ns"), "changed", "5", &[]);
    store.apply(same.clone());
    store.apply(changed.clone());
    let replaced = store.replace(
        vec![
            cm(Some("ns"), "same", "5", &[]),
            cm(Some("ns"), "changed", "6", &[]),
        ],
        "6".into(),
    );
    let cached_same = store
        .get(&ObjectKey::namespaced("ns", "same"))
        .expect("cached");
    let cached_changed = store
        .get(&ObjectKey::namespaced("ns", "changed"))
        .expect("cached");
    assert!(Arc::ptr_eq(&cached_same, &same), "unchanged: one copy only");
    assert!(!Arc::ptr_eq(&cached_changed, &changed));
    for (new, old) in &replaced.listed {
        let unchanged = new.metadata.name.as_deref() == Some("same");
        let old = old.as_ref().expect("both were cached");
        assert_eq!(Arc::ptr_eq(new, old), unchanged, "{:?}", new.metadata.name);
    }
}

#[test]
fn compact_store_should_keep_the_cached_bytes_when_a_relisted_object_is_unchanged() {
    let store = ObjectCache::with_form(&CacheForm::compact_with_recent(0));
    store.apply(cm(Some("ns"), "same", "5", &[]));
    store.apply(cm(Some("ns"), "changed", "5", &[]));
    let stamps = |store: &ObjectCache<ConfigMap>| -> Vec<u64> {
        let state = store.shared.state.read();
        state
            .objects
            .values()
            .map(|slot| match slot {
                Slot::Packed(packed) => packed.stamp,
                Slot::Decoded(_) => panic!("a compact store packs"),
            })
            .collect()
    };
    let before = stamps(&store);
    let replaced = store.replace(
        vec![
            cm(Some("ns"), "same", "5", &[]),
            cm(Some("ns"), "changed", "6", &[]),
        ],
        "6".into(),
    );
    let after = stamps(&store);
    // Key order: "changed" then "same".
    assert_ne!(after[0], before[0], "the changed object is re-encoded");
    assert_eq!(after[1], before[1], "the unchanged one keeps its bytes");
    for (new, old) in &replaced.listed {
        let unchanged = new.metadata.name.as_deref() == Some("same");
        let old = old.as_ref().expect("both were cached");
        assert_eq!(Arc::ptr_eq(new, old), unchanged, "{:?}", new.metadata.name);
        if !unchanged {
            assert_eq!(old.metadata.resource_version.as_deref(), Some("5"));
        }
    }
}

#[test]
fn compact_store_should_decode_once_for_repeated_reads_and_not_for_filtering() {
    let store = ObjectCache::with_form(&CacheForm::compact_with_recent(8));
    store.replace(
        (0..100)
            .map(|i| {
                cm(
                    Some("ns"),
                    &format!("o{i:03}"),
                    "1",
                    &[("i", &i.to_string())],
                )
            })
            .collect(),
        "1".into(),
    );
    let key = ObjectKey::namespaced("ns", "o007");
    let first = store.get(&key).expect("cached");
    let second = store.get(&key).expect("cached");
    assert!(
        Arc::ptr_eq(&first, &second),
        "the second read is the kept decode"
    );
    // A selector matching one object decodes only it: the one result is kept.
    let one = LabelSelector::parse("i=42").expect("valid selector");
    let selected = store.list_selected(None, &one);
    assert_eq!(names(&selected), ["ns/o042"]);
    let again = store
        .get(&ObjectKey::namespaced("ns", "o042"))
        .expect("cached");
    assert!(Arc::ptr_eq(&selected[0], &again));
    // A whole list is a scan: it does not evict what was kept.
    assert_eq!(store.list().len(), 100);
    assert!(Arc::ptr_eq(&store.get(&key).expect("cached"), &first));
    // A watch event keeps the written object decoded.
    let written = cm(Some("ns"), "o007", "2", &[]);
    store.apply(written.clone());
    assert!(Arc::ptr_eq(&store.get(&key).expect("cached"), &written));
}

/// A kind whose JSON does not decode back into it: `data` is required but never written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
struct OneWay {
    metadata: ObjectMeta,
    #[serde(skip_serializing)]
    data: String,
}

impl Resource for OneWay {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "OneWay".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "oneways".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[test]
fn compact_store_should_hold_objects_decoded_when_they_do_not_round_trip() {
    let store = ObjectCache::with_form(&CacheForm::<OneWay>::compact());
    let one_way = |name: &str| OneWay {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        data: "only in memory".into(),
    };
    store.apply(Arc::new(one_way("a")));
    store.replace(
        vec![Arc::new(one_way("a")), Arc::new(one_way("b"))],
        "1".into(),
    );
    for name in ["a", "b"] {
        let got = store.get(&ObjectKey::namespaced("ns", name));
        assert_eq!(got.as_deref(), Some(&one_way(name)), "{name} is intact");
    }
    assert_eq!(store.list().len(), 2);
}

#[test]
fn store_should_never_show_a_reader_a_half_applied_relist() {
    for form in forms() {
        // Two sets with disjoint keys, swapped back and forth while readers list: every read
        // must be exactly one of them.
        let set = |prefix: &str| -> Vec<Arc<ConfigMap>> {
            (0..200)
                .map(|i| {
                    cm(
                        Some("ns"),
                        &format!("{prefix}{i:03}"),
                        "1",
                        &[("set", prefix)],
                    )
                })
                .collect()
        };
        let store = ObjectCache::with_form(&form);
        store.add_index(
            "set",
            Arc::new(|c: &ConfigMap| {
                c.metadata
                    .labels
                    .iter()
                    .flatten()
                    .map(|(_, v)| v.clone())
                    .collect()
            }),
        );
        store.replace(set("a"), "1".into());
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let store = store.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !done.load(Ordering::Relaxed) || reads < 20 {
                        let all = store.list();
                        let first = all[0].metadata.name.clone().unwrap_or_default();
                        let prefix = &first[..1];
                        assert_eq!(all.len(), 200, "a whole set");
                        assert!(
                            all.iter().all(|o| o
                                .metadata
                                .name
                                .as_deref()
                                .is_some_and(|n| n.starts_with(prefix))),
                            "a read mixed two lists"
                        );
                        let indexed = store.by_index("set", prefix).expect("index exists");
                        assert!(
                            indexed.len() == 200 || indexed.is_empty(),
                            "an index mixed two lists"
                        );
                        let selector =
                            LabelSelector::parse(&format!("set={prefix}")).expect("valid");
                        let selected = store.list_selected(Some("ns"), &selector);
                        assert!(
                            selected.len() == 200 || selected.is_empty(),
                            "a selection mixed two lists"
                        );
                        reads += 1;
                    }
                })
            })
            .collect();
        for round in 0..100 {
            let prefix = if round % 2 == 0 { "b" } else { "a" };
            store.replace(set(prefix), round.to_string());
        }
        done.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().expect("no reader saw a mixed list");
        }
        store.check_invariants();
    }
}

#[tokio::test]
async fn store_should_resolve_wait_until_synced_after_the_first_list() {
    let store: ObjectCache<ConfigMap> = ObjectCache::new();
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move { store.wait_until_synced().await })
    };
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    assert!(!store.is_synced());
    store.replace(Vec::new(), "1".into());
    waiter.await.expect("waiter resolves");
    assert!(store.is_synced());
    // Already synced: resolves at once.
    store.wait_until_synced().await;
}
