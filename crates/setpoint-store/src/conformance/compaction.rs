//! Conformance cases for `compact`: what it forgets, what it keeps, and what it refuses.

use super::{b, current, WatchReader};
use crate::{KeyValue, ListRequest, Revision, Store, StoreError};

fn expect_compacted<T: std::fmt::Debug>(result: crate::Result<T>, requested: u64, compacted: u64) {
    match result {
        Err(StoreError::Compacted {
            requested: r,
            compacted: c,
        }) => {
            assert_eq!(
                (r, c),
                (Revision(requested), Revision(compacted)),
                "Compacted fields"
            );
        }
        other => panic!("expected Compacted({requested}, {compacted}), got {other:?}"),
    }
}

/// Compaction keeps every current value and the history after the compaction revision (lists
/// at it and later, watches from it); lists at older revisions then fail with `Compacted`.
/// It consumes no revision.
pub async fn compaction_should_keep_current_values_and_refuse_older_reads<S: Store>(store: S) {
    store.create(b("/a"), b("1")).await.expect("create"); // 1
    store.create(b("/b"), b("1")).await.expect("create"); // 2
    let a = store.update(b("/a"), b("2"), None).await.expect("update"); // 3
    store.delete(b("/b"), None).await.expect("delete"); // 4
    let c1 = store.create(b("/c"), b("1")).await.expect("create"); // 5
    let c2 = store.update(b("/c"), b("2"), None).await.expect("update"); // 6
    let before = store.list(ListRequest::prefix("")).await.expect("list");

    store.compact(Revision(4)).await.expect("compact");
    assert_eq!(current(&store).await, Revision(6));
    let after = store.list(ListRequest::prefix("")).await.expect("list");
    assert_eq!(after, before);
    assert_eq!(store.get(b"/a").await.expect("get"), Some(a.clone()));
    assert_eq!(store.count(b"").await.expect("count"), 2);
    let at = |revision: u64| store.list(ListRequest::prefix("").at(Revision(revision)));
    assert_eq!(
        at(4).await.expect("list at the compaction revision").kvs,
        vec![a.clone()]
    );
    assert_eq!(
        at(5).await.expect("list after it").kvs,
        vec![a.clone(), c1.clone()]
    );
    for old in [0, 1, 3] {
        expect_compacted(at(old).await, old, 4);
    }

    let mut watch = WatchReader::open(&store, "", Revision(4)).await;
    let next = store
        .create(b("/d"), b("1"))
        .await
        .expect("a write after compaction");
    assert_eq!(next.mod_revision, Revision(7));
    let events: Vec<KeyValue> = watch
        .read_until(Revision(7))
        .await
        .into_iter()
        .map(|e| e.kv)
        .collect();
    assert_eq!(events, vec![c1, c2, next]);
}

/// Compacting a revision not reached yet fails with `FutureRevision`; compacting at or below the
/// compacted revision (including 0 on a new store) fails with `Compacted`. Neither changes
/// anything.
pub async fn compact_should_refuse_future_and_already_compacted_revisions<S: Store>(store: S) {
    expect_compacted(store.compact(Revision(0)).await, 0, 0);
    match store.compact(Revision(1)).await {
        Err(StoreError::FutureRevision { requested, current }) => {
            assert_eq!((requested, current), (Revision(1), Revision(0)))
        }
        other => panic!("expected FutureRevision, got {other:?}"),
    }
    for i in 0..3 {
        store
            .create(b(format!("/{i}")), b("v"))
            .await
            .expect("create");
    }
    match store.compact(Revision(4)).await {
        Err(StoreError::FutureRevision { requested, current }) => {
            assert_eq!((requested, current), (Revision(4), Revision(3)))
        }
        other => panic!("expected FutureRevision, got {other:?}"),
    }
    store.compact(Revision(2)).await.expect("compact");
    expect_compacted(store.compact(Revision(2)).await, 2, 2);
    expect_compacted(store.compact(Revision(1)).await, 1, 2);
    store
        .compact(Revision(3))
        .await
        .expect("compact to the current revision");
    expect_compacted(store.compact(Revision(3)).await, 3, 3);
    expect_compacted(
        store.list(ListRequest::prefix("").at(Revision(2))).await,
        2,
        3,
    );
    assert_eq!(
        store
            .list(ListRequest::prefix("").at(Revision(3)))
            .await
            .expect("list")
            .kvs
            .len(),
        3
    );
    assert_eq!(current(&store).await, Revision(3));
    let next = store.create(b("/next"), b("v")).await.expect("create");
    assert_eq!(next.mod_revision, Revision(4));
}
