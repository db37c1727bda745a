//! Conformance cases for `list`: prefixes, start keys, limits and paging, and reads at past and
//! future revisions.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::{b, current};
use crate::{KeyValue, ListRequest, ListResult, Revision, Store, StoreError};

async fn list<S: Store + ?Sized>(store: &S, request: ListRequest) -> ListResult {
    let described = format!("{request:?}");
    store
        .list(request)
        .await
        .unwrap_or_else(|e| panic!("list {described}: {e}"))
}

fn keys(result: &ListResult) -> Vec<Bytes> {
    result.kvs.iter().map(|kv| kv.key.clone()).collect()
}

fn sorted(mut keys: Vec<Bytes>) -> Vec<Bytes> {
    keys.sort();
    keys
}

/// A list returns exactly the keys that start with the prefix byte-wise, in byte order, each
/// with its current key-value, at the current revision; `/a/` does not include `/a`, `/a0` or
/// `/ab`, and prefixes of `0xff` bytes (which have no end key) work.
pub async fn list_should_return_exactly_the_keys_under_the_prefix_in_byte_order<S: Store>(
    store: S,
) {
    let empty = list(&store, ListRequest::prefix("")).await;
    assert_eq!(
        (empty.kvs.len(), empty.revision, empty.remaining),
        (0, Revision(0), 0)
    );
    let all: Vec<Bytes> = [
        &b"/ab/c"[..],
        b"/a/x",
        b"/a",
        b"/a/\xff\xff",
        b"/a/B",
        b"\xff\xff",
        b"/a/",
        b"/a0",
        b"/a/b",
        b"\xff",
        b"/ab",
        b"/a/\x00",
        b"/b/1",
        b"\xff\xff\x00",
    ]
    .into_iter()
    .map(b)
    .collect();
    for (i, key) in all.iter().enumerate() {
        store
            .create(key.clone(), b(format!("v{i}")))
            .await
            .expect("create");
    }
    let under = |prefix: &[u8]| {
        sorted(
            all.iter()
                .filter(|k| k.starts_with(prefix))
                .cloned()
                .collect(),
        )
    };
    for prefix in [
        &b"/a/"[..],
        b"/a",
        b"",
        b"\xff",
        b"\xff\xff",
        b"/c/",
        b"/a/x",
        b"/ab",
    ] {
        let result = list(&store, ListRequest::prefix(b(prefix))).await;
        assert_eq!(keys(&result), under(prefix), "list {prefix:?}");
        assert_eq!(
            (result.revision, result.remaining),
            (Revision(all.len() as u64), 0)
        );
        for kv in &result.kvs {
            assert_eq!(Some(kv), store.get(&kv.key).await.expect("get").as_ref());
        }
    }
    assert_eq!(
        keys(&list(&store, ListRequest::prefix("/a/")).await),
        [
            &b"/a/"[..],
            b"/a/\x00",
            b"/a/B",
            b"/a/b",
            b"/a/x",
            b"/a/\xff\xff"
        ]
        .map(b)
        .to_vec(),
    );
}

/// A start key (which must be under the prefix) starts the list at that key, inclusive, or at
/// the next one if it does not exist.
pub async fn list_should_start_at_the_start_key_inclusive<S: Store>(store: S) {
    for i in 1..=9 {
        store
            .create(b(format!("/a/{i}")), b("v"))
            .await
            .expect("create");
    }
    store.create(b("/b/1"), b("v")).await.expect("create");
    let from = |range: std::ops::RangeInclusive<u32>| {
        range.map(|i| b(format!("/a/{i}"))).collect::<Vec<_>>()
    };
    let cases = [
        (&b"/a/3"[..], from(3..=9)),
        (b"/a/35", from(4..=9)),
        (b"/a/", from(1..=9)),
        (b"/a/0", from(1..=9)),
        (b"/a/9", from(9..=9)),
        (b"/a/9\x00", vec![]),
        (b"/a/\xff", vec![]),
    ];
    for (start, expected) in cases {
        let result = list(&store, ListRequest::prefix("/a/").start(b(start))).await;
        assert_eq!(keys(&result), expected, "start {start:?}");
        assert_eq!(result.remaining, 0);
    }
}

/// A limit returns at most that many keys and says how many are left in the range; no limit,
/// or a limit of 0, returns all.
pub async fn list_should_limit_and_report_the_remaining_keys<S: Store>(store: S) {
    for i in 0..10 {
        store
            .create(b(format!("/a/{i}")), b("v"))
            .await
            .expect("create");
    }
    store.create(b("/b/x"), b("v")).await.expect("create");
    let cases = [
        (None, None, 0..10, 0),
        (None, Some(0), 0..10, 0),
        (None, Some(3), 0..3, 7),
        (None, Some(10), 0..10, 0),
        (None, Some(11), 0..10, 0),
        (Some("/a/5"), Some(2), 5..7, 3),
        (Some("/a/8"), Some(5), 8..10, 0),
        (Some("/a/9\0"), Some(1), 0..0, 0),
    ];
    for (start, limit, expected, remaining) in cases {
        let request = ListRequest {
            prefix: b("/a/"),
            start: start.map(b),
            revision: None,
            limit,
            only_more: false,
        };
        let result = list(&store, request).await;
        let expected: Vec<Bytes> = expected.map(|i| b(format!("/a/{i}"))).collect();
        assert_eq!(keys(&result), expected, "start {start:?} limit {limit:?}");
        assert_eq!(
            result.remaining, remaining,
            "start {start:?} limit {limit:?}"
        );
        assert_eq!(result.more(), remaining > 0);
        // Asked only whether more are left: the same page, and "more" told right (the count
        // may stop at 1).
        let request = ListRequest {
            prefix: b("/a/"),
            start: start.map(b),
            revision: None,
            limit,
            only_more: true,
        };
        let page = list(&store, request).await;
        assert_eq!(
            page.kvs, result.kvs,
            "only_more: start {start:?} limit {limit:?}"
        );
        assert_eq!(
            page.more(),
            remaining > 0,
            "only_more: start {start:?} limit {limit:?}"
        );
        assert!(page.remaining <= remaining);
    }
}

/// Paging through a large range at the revision of the first page returns exactly that
/// snapshot, however the range is written to between pages and while they are read.
pub async fn paged_list_should_read_one_snapshot_while_writes_continue<S: Store>(store: S) {
    const KEYS: usize = 200;
    let store = Arc::new(store);
    for i in 0..KEYS {
        store
            .create(b(format!("/p/{i:03}")), b("v0"))
            .await
            .expect("create");
    }
    store.create(b("/q/0"), b("v0")).await.expect("create");
    let snapshot = list(&*store, ListRequest::prefix("/p/")).await;
    assert_eq!(snapshot.kvs.len(), KEYS);

    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn({
        let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
        async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = b(format!("/p/{:03}", (i * 7) % KEYS));
                match store.update(key, b(format!("w{i}")), None).await {
                    Ok(_) | Err(StoreError::NotFound) => {}
                    Err(e) => panic!("concurrent update: {e}"),
                }
                i += 1;
                tokio::task::yield_now().await;
            }
        }
    });

    let mut request = ListRequest::prefix("/p/").limit(7).at(snapshot.revision);
    let mut seen: Vec<KeyValue> = vec![];
    let mut page_number = 0;
    loop {
        let page = list(&*store, request.clone()).await;
        assert_eq!(
            page.revision, snapshot.revision,
            "page {page_number} read at another revision"
        );
        seen.extend(page.kvs.iter().cloned());
        assert_eq!(
            page.remaining,
            (KEYS - seen.len()) as u64,
            "remaining after page {page_number}"
        );
        let Some(last) = page.kvs.last() else { break };
        // Change the range behind, at and ahead of the cursor.
        let at = seen.len() % KEYS;
        store
            .update(last.key.clone(), b("changed"), None)
            .await
            .expect("update");
        store
            .create(b(format!("/p/{at:03}x")), b("new"))
            .await
            .expect("create");
        if at + 5 < KEYS {
            let ahead = b(format!("/p/{:03}", at + 5));
            if store.get(&ahead).await.expect("get").is_some() {
                store.delete(ahead, None).await.expect("delete");
            }
        }
        let mut next = last.key.to_vec();
        next.push(0);
        request = request.start(next);
        page_number += 1;
        if !page.more() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("writer");
    assert_eq!(seen, snapshot.kvs, "the pages differ from the snapshot");
    let now = list(&*store, ListRequest::prefix("/p/")).await;
    assert_ne!(now.kvs, snapshot.kvs, "the writes were not applied");
}

/// A list at a past revision returns every key-value under the prefix as it was then (values,
/// versions, create and mod revisions; deleted keys present, later ones absent), paged or not.
pub async fn list_at_an_old_revision_should_return_the_values_as_they_were<S: Store>(store: S) {
    let mut state: BTreeMap<Bytes, KeyValue> = BTreeMap::new();
    let mut states = vec![state.clone()];
    for i in 0u64..60 {
        let key = b(format!("/{}/{}", ["x", "y"][(i % 2) as usize], (i * 5) % 8));
        let kv = match state.get(&key) {
            None => Some(
                store
                    .create(key.clone(), b(format!("c{i}")))
                    .await
                    .expect("create"),
            ),
            Some(_) if i % 3 == 0 => {
                store.delete(key.clone(), None).await.expect("delete");
                None
            }
            Some(old) => Some(
                store
                    .update(key.clone(), b(format!("u{i}")), Some(old.mod_revision))
                    .await
                    .expect("update"),
            ),
        };
        match kv {
            Some(kv) => state.insert(key, kv),
            None => state.remove(&key),
        };
        states.push(state.clone());
    }
    for (revision, state) in states.iter().enumerate() {
        let revision = Revision(revision as u64);
        for prefix in ["", "/x/", "/y/"] {
            let expected: Vec<KeyValue> = state
                .values()
                .filter(|kv| kv.key.starts_with(prefix.as_bytes()))
                .cloned()
                .collect();
            let result = list(&store, ListRequest::prefix(prefix).at(revision)).await;
            assert_eq!(result.kvs, expected, "list {prefix:?} at {revision}");
            assert_eq!((result.revision, result.remaining), (revision, 0));
            let page = list(&store, ListRequest::prefix(prefix).at(revision).limit(2)).await;
            assert_eq!(
                page.kvs,
                expected[..expected.len().min(2)],
                "first page of {prefix:?} at {revision}"
            );
            assert_eq!(page.remaining, expected.len().saturating_sub(2) as u64);
        }
    }
}

/// A list at a revision the store has not reached fails with `FutureRevision`.
pub async fn list_at_a_future_revision_should_fail<S: Store>(store: S) {
    let expect_future = |result: crate::Result<ListResult>, requested: u64, now: u64| match result {
        Err(StoreError::FutureRevision {
            requested: r,
            current: c,
        }) => {
            assert_eq!((r, c), (Revision(requested), Revision(now)));
        }
        other => panic!("expected FutureRevision({requested}, {now}), got {other:?}"),
    };
    expect_future(
        store.list(ListRequest::prefix("").at(Revision(1))).await,
        1,
        0,
    );
    for i in 0..3 {
        store
            .create(b(format!("/{i}")), b("v"))
            .await
            .expect("create");
    }
    expect_future(
        store.list(ListRequest::prefix("").at(Revision(4))).await,
        4,
        3,
    );
    expect_future(
        store
            .list(ListRequest::prefix("/0").at(Revision(100)))
            .await,
        100,
        3,
    );
    let at_current = list(&store, ListRequest::prefix("").at(Revision(3))).await;
    assert_eq!(at_current.kvs.len(), 3);
    assert_eq!(current(&store).await, Revision(3));
}

/// A start key outside the prefix is an invalid argument.
pub async fn list_with_a_start_key_outside_the_prefix_should_be_invalid<S: Store>(store: S) {
    store.create(b("/a/1"), b("v")).await.expect("create");
    for start in ["/b/", "/a", "", "/a0"] {
        let result = store.list(ListRequest::prefix("/a/").start(start)).await;
        assert!(
            matches!(result, Err(StoreError::InvalidArgument(_))),
            "start {start:?}: {result:?}"
        );
    }
    let from_prefix = list(&store, ListRequest::prefix("/a/").start("/a/")).await;
    assert_eq!(from_prefix.kvs.len(), 1);
}
