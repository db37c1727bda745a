//! Conformance cases for `watch`: order, completeness, prefixes, resuming, future and compacted
//! start revisions, and many watchers and writers at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinSet;

use super::{b, current, WatchReader};
use crate::{Event, EventKind, KeyValue, Revision, Store, StoreError};

/// How long a watch must stay quiet once it has delivered everything.
const QUIET: Duration = Duration::from_millis(150);

/// Writes `n` changes (creates, conditional updates, deletes, re-creates) to a few keys under
/// each of `prefixes`, returning the event each write must produce.
async fn mixed_writes<S: Store + ?Sized>(store: &S, prefixes: &[&str], n: usize) -> Vec<Event> {
    let mut state: BTreeMap<Bytes, KeyValue> = BTreeMap::new();
    let mut events = vec![];
    for i in 0..n {
        let key = b(format!("{}{}", prefixes[i % prefixes.len()], (i * 3) % 5));
        let event = match state.get(&key).cloned() {
            None => put(
                store
                    .create(key.clone(), b(format!("c{i}")))
                    .await
                    .expect("create"),
                None,
            ),
            Some(old) if i % 4 == 0 => store
                .delete(key.clone(), Some(old.mod_revision))
                .await
                .expect("delete"),
            Some(old) => {
                let new = store
                    .update(key.clone(), b(format!("u{i}")), Some(old.mod_revision))
                    .await
                    .expect("update");
                put(new, Some(old))
            }
        };
        match event.kind {
            EventKind::Put => state.insert(key, event.kv.clone()),
            EventKind::Delete => state.remove(&key),
        };
        events.push(event);
    }
    events
}

fn put(kv: KeyValue, prev: Option<KeyValue>) -> Event {
    Event {
        kind: EventKind::Put,
        kv,
        prev,
    }
}

fn under<'a>(events: &'a [Event], prefix: &'a str) -> impl Iterator<Item = &'a Event> + 'a {
    events
        .iter()
        .filter(move |e| e.kv.key.starts_with(prefix.as_bytes()))
}

fn revisions(events: &[Event]) -> Vec<Revision> {
    events.iter().map(Event::revision).collect()
}

/// A watch delivers every change after its start revision exactly once, in revision order, each
/// as the write returned it (puts with the new value and the previous one, deletes as the delete
/// event), whether it was open before the writes (live) or opened after them (from history).
pub async fn watch_should_deliver_every_change_in_order_with_prev_values<S: Store>(store: S) {
    let mut live = WatchReader::open(&store, "", Revision(0)).await;
    let expected = mixed_writes(&store, &["/a/", "/b/"], 30).await;
    let last = Revision(expected.len() as u64);
    assert_eq!(
        revisions(&expected),
        (1..=last.get()).map(Revision).collect::<Vec<_>>()
    );
    assert_eq!(live.read_until(last).await, expected, "live watch");
    let mut historical = WatchReader::open(&store, "", Revision(0)).await;
    assert_eq!(
        historical.read_until(last).await,
        expected,
        "watch from history"
    );
    let mut from_middle = WatchReader::open(&store, "", Revision(10)).await;
    assert_eq!(
        from_middle.read_until(last).await,
        expected[10..],
        "watch from revision 10"
    );
    for reader in [&mut live, &mut historical, &mut from_middle] {
        reader.expect_quiet(QUIET).await;
    }
}

/// A watch delivers exactly the changes to keys that start with its prefix byte-wise.
pub async fn watch_should_only_deliver_changes_under_its_prefix<S: Store>(store: S) {
    let prefixes = ["/a/", "/a", "/ab", "", "/b/"];
    let mut readers = vec![];
    for prefix in prefixes {
        readers.push(WatchReader::open(&store, prefix, Revision(0)).await);
    }
    let mut expected = vec![];
    for key in [
        "/a/1", "/a0", "/ab", "/a", "/b/1", "/a/", "/ab/1", "/b", "/c",
    ] {
        expected.push(put(
            store.create(b(key), b("1")).await.expect("create"),
            None,
        ));
    }
    let old = store.get(b"/a0").await.expect("get").expect("/a0");
    expected.push(put(
        store.update(b("/a0"), b("2"), None).await.expect("update"),
        Some(old),
    ));
    expected.push(store.delete(b("/a/1"), None).await.expect("delete"));
    expected.push(store.delete(b("/ab"), None).await.expect("delete"));
    // A last change under every watched prefix, so each watch knows when it has seen all.
    for key in ["/a/~", "/ab~", "/b/~"] {
        expected.push(put(
            store.create(b(key), b("end")).await.expect("create"),
            None,
        ));
    }
    for (prefix, reader) in prefixes.iter().zip(&mut readers) {
        let wanted: Vec<Event> = under(&expected, prefix).cloned().collect();
        let last = wanted
            .last()
            .expect("a change under every prefix")
            .revision();
        assert_eq!(reader.read_until(last).await, wanted, "watch of {prefix:?}");
        assert_eq!(reader.take_pending(), vec![], "watch of {prefix:?}");
        reader.expect_quiet(QUIET).await;
    }
}

/// A watch can be started from every retained revision and delivers exactly the changes after
/// it, then the live ones.
pub async fn watch_should_resume_from_every_retained_revision<S: Store>(store: S) {
    let mut expected = mixed_writes(&store, &["/a/", "/b/"], 40).await;
    let last = current(&store).await;
    let mut readers = vec![];
    for after in 0..=last.get() {
        for prefix in ["", "/a/"] {
            readers.push((
                prefix,
                after,
                WatchReader::open(&store, prefix, Revision(after)).await,
            ));
        }
    }
    let end = store.create(b("/a/~"), b("end")).await.expect("create");
    expected.push(put(end.clone(), None));
    for (prefix, after, reader) in &mut readers {
        let wanted: Vec<Event> = under(&expected, prefix)
            .filter(|e| e.revision() > Revision(*after))
            .cloned()
            .collect();
        assert_eq!(
            reader.read_until(end.mod_revision).await,
            wanted,
            "watch of {prefix:?} after {after}"
        );
    }
    for (prefix, after, reader) in &mut readers {
        reader.read_ready();
        assert_eq!(
            reader.take_pending(),
            vec![],
            "watch of {prefix:?} after {after}"
        );
    }
    readers[0].2.expect_quiet(QUIET).await;
}

/// A watch from a revision the store has not reached delivers nothing until the store passes
/// it, then exactly the changes after it.
pub async fn watch_from_a_future_revision_should_wait_then_deliver<S: Store>(store: S) {
    mixed_writes(&store, &["/a/"], 3).await;
    let mut reader = WatchReader::open(&store, "", Revision(6)).await;
    reader.expect_quiet(QUIET).await;
    for i in 4..=6 {
        store
            .create(b(format!("/early/{i}")), b("v"))
            .await
            .expect("create");
    }
    reader.expect_quiet(QUIET).await;
    let seventh = store.create(b("/late/7"), b("v")).await.expect("create");
    let eighth = store.create(b("/late/8"), b("v")).await.expect("create");
    assert_eq!(
        reader.read_until(Revision(8)).await,
        vec![put(seventh, None), put(eighth, None)]
    );
    reader.expect_quiet(QUIET).await;
}

/// A watch from a compacted revision fails at once with `Compacted`; from the compaction
/// revision itself it works.
pub async fn watch_from_a_compacted_revision_should_fail<S: Store>(store: S) {
    let expected = mixed_writes(&store, &["/a/"], 5).await;
    store.compact(Revision(3)).await.expect("compact");
    for (prefix, after) in [("", 2), ("/a/", 0), ("/x/", 1)] {
        match store.watch(b(prefix), Revision(after)).await {
            Err(StoreError::Compacted {
                requested,
                compacted,
            }) => {
                assert_eq!((requested, compacted), (Revision(after), Revision(3)));
            }
            Err(e) => panic!("watch after {after}: expected Compacted, got {e:?}"),
            Ok(_) => panic!("watch after {after}: expected Compacted, got a watch"),
        }
    }
    let mut reader = WatchReader::open(&store, "", Revision(3)).await;
    assert_eq!(reader.read_until(Revision(5)).await, expected[3..]);
    reader.expect_quiet(QUIET).await;
}

/// A watch that has not delivered history that is then compacted either still delivers
/// everything without a gap (it had it in hand) or delivers a gap-free beginning and then fails
/// with `Compacted` and ends; it never skips.
pub async fn watch_left_behind_by_compaction_should_fail_or_continue_without_gaps<S: Store>(
    store: S,
) {
    let mut reader = WatchReader::open(&store, "", Revision(0)).await;
    let mut expected = vec![];
    for i in 0..300 {
        expected.push(put(
            store
                .create(b(format!("/k/{i}")), b("v"))
                .await
                .expect("create"),
            None,
        ));
    }
    store.compact(Revision(300)).await.expect("compact");
    for i in 300..310 {
        expected.push(put(
            store
                .create(b(format!("/k/{i}")), b("v"))
                .await
                .expect("create"),
            None,
        ));
    }
    match reader.try_read_until(Revision(310)).await {
        Ok(events) => assert_eq!(events, expected),
        Err((events, error)) => {
            assert_eq!(
                events,
                expected[..events.len()],
                "events before the failure"
            );
            match error {
                StoreError::Compacted {
                    requested,
                    compacted,
                } => {
                    assert_eq!(compacted, Revision(300));
                    assert!(
                        requested < compacted,
                        "requested {requested} was not compacted"
                    );
                }
                other => panic!("expected Compacted, got {other:?}"),
            }
            reader.expect_end().await;
        }
    }
}

/// Watchers of one prefix opened at the same revision all see the same sequence of changes,
/// while tasks write concurrently.
pub async fn concurrent_watchers_should_see_the_same_sequence<S: Store>(store: S) {
    const WRITERS: usize = 4;
    const WRITES: usize = 50;
    let store = Arc::new(store);
    let mut everything = vec![];
    for _ in 0..8 {
        everything.push(WatchReader::open(&*store, "", Revision(0)).await);
    }
    let mut first_writer = vec![];
    for _ in 0..4 {
        first_writer.push(WatchReader::open(&*store, "/w0/", Revision(0)).await);
    }
    let mut tasks = JoinSet::new();
    for t in 0..WRITERS {
        let store = Arc::clone(&store);
        tasks.spawn(async move { mixed_writes(&*store, &[&format!("/w{t}/")], WRITES).await });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("writer");
    }
    let last = Revision((WRITERS * WRITES) as u64);
    assert_eq!(current(&*store).await, last);
    let sequence = everything[0].read_until(last).await;
    assert_eq!(
        revisions(&sequence),
        (1..=last.get()).map(Revision).collect::<Vec<_>>()
    );
    for (i, reader) in everything.iter_mut().enumerate().skip(1) {
        assert_eq!(reader.read_until(last).await, sequence, "watcher {i}");
    }
    let wanted: Vec<Event> = under(&sequence, "/w0/").cloned().collect();
    let last_w0 = wanted.last().expect("writes under /w0/").revision();
    for (i, reader) in first_writer.iter_mut().enumerate() {
        assert_eq!(
            reader.read_until(last_w0).await,
            wanted,
            "watcher {i} of /w0/"
        );
    }
    everything[0].expect_quiet(QUIET).await;
    first_writer[0].expect_quiet(QUIET).await;
}

/// Writes from many tasks at once all succeed with distinct revisions that together are exactly
/// 1..=N, and a watcher sees every one of them, in revision order, as the writes returned them.
pub async fn concurrent_writers_should_get_distinct_revisions_seen_in_order<S: Store>(store: S) {
    const TASKS: usize = 16;
    const WRITES: usize = 50;
    let store = Arc::new(store);
    let mut reader = WatchReader::open(&*store, "", Revision(0)).await;
    let mut tasks = JoinSet::new();
    for t in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let key = b(format!("/t{t}/k"));
            let mut events = vec![];
            let mut last = store.create(key.clone(), b("0")).await.expect("create");
            events.push(put(last.clone(), None));
            for i in 1..WRITES {
                if i % 10 == 0 {
                    events.push(
                        store
                            .delete(key.clone(), Some(last.mod_revision))
                            .await
                            .expect("delete"),
                    );
                    last = store
                        .create(key.clone(), b(format!("{i}")))
                        .await
                        .expect("re-create");
                    events.push(put(last.clone(), None));
                } else {
                    let new = store
                        .update(key.clone(), b(format!("{i}")), Some(last.mod_revision))
                        .await
                        .expect("update");
                    events.push(put(new.clone(), Some(last)));
                    last = new;
                }
            }
            events
        });
    }
    let mut expected = vec![];
    while let Some(done) = tasks.join_next().await {
        expected.extend(done.expect("writer"));
    }
    expected.sort_by_key(Event::revision);
    let total = expected.len() as u64;
    assert_eq!(
        revisions(&expected),
        (1..=total).map(Revision).collect::<Vec<_>>(),
        "revisions not distinct and dense"
    );
    assert_eq!(current(&*store).await, Revision(total));
    assert_eq!(reader.read_until(Revision(total)).await, expected);
    reader.expect_quiet(QUIET).await;
}

/// Watches dropped unread, or part-read, leave the store working and other watches intact.
pub async fn dropped_watches_should_not_disturb_the_store<S: Store>(store: S) {
    let mut kept = WatchReader::open(&store, "", Revision(0)).await;
    let mut dropped = vec![];
    for i in 0..50 {
        let prefix = ["", "/a/", "/b/"][i % 3];
        dropped.push(store.watch(b(prefix), Revision(0)).await.expect("watch"));
    }
    dropped.truncate(25);
    let mut expected = mixed_writes(&store, &["/a/", "/b/"], 10).await;
    let mut part_read = WatchReader::open(&store, "", Revision(0)).await;
    part_read.read_until(Revision(3)).await;
    drop(part_read);
    drop(dropped);
    for i in 0..10 {
        expected.push(put(
            store
                .create(b(format!("/c/{i}")), b("v"))
                .await
                .expect("create"),
            None,
        ));
    }
    assert_eq!(kept.read_until(Revision(20)).await, expected);
    let mut fresh = WatchReader::open(&store, "", Revision(0)).await;
    assert_eq!(fresh.read_until(Revision(20)).await, expected);
    kept.expect_quiet(QUIET).await;
}
