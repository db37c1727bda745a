//! Conformance cases for writes and point reads: revisions, versions, preconditions, errors,
//! `get` and `count`.

use std::sync::Arc;

use bytes::Bytes;
use tokio::task::JoinSet;

use super::{b, current};
use crate::{Event, EventKind, KeyValue, ListRequest, Revision, Store, StoreError};

/// A value every backend must refuse: one byte over 4 MiB (a backend's limit may be lower).
const TOO_LARGE: usize = (4 << 20) + 1;

fn kv(key: &str, value: &str, create: u64, modified: u64, version: u64) -> KeyValue {
    KeyValue {
        key: b(key),
        value: b(value),
        create_revision: Revision(create),
        mod_revision: Revision(modified),
        version,
    }
}

fn expect_conflict(result: crate::Result<impl std::fmt::Debug>, expected: u64, current: &KeyValue) {
    match result {
        Err(StoreError::Conflict {
            expected: e,
            current: c,
        }) => {
            assert_eq!(e, Revision(expected), "Conflict.expected");
            assert_eq!(*c, *current, "Conflict.current");
        }
        other => panic!("expected a conflict with {current:?}, got {other:?}"),
    }
}

fn expect_not_found(result: crate::Result<impl std::fmt::Debug>) {
    assert!(
        matches!(result, Err(StoreError::NotFound)),
        "expected NotFound, got {result:?}"
    );
}

/// An empty store is at revision 0; every successful write (create, update, delete, with or
/// without a precondition) takes exactly the next revision.
pub async fn revisions_should_increase_by_one_per_successful_write<S: Store>(store: S) {
    assert_eq!(current(&store).await, Revision(0));
    let mut revisions = vec![];
    revisions.push(
        store
            .create(b("/a"), b("1"))
            .await
            .expect("create")
            .mod_revision,
    );
    revisions.push(
        store
            .update(b("/a"), b("2"), None)
            .await
            .expect("update")
            .mod_revision,
    );
    revisions.push(
        store
            .create(b("/b"), b("1"))
            .await
            .expect("create")
            .mod_revision,
    );
    revisions.push(
        store
            .delete(b("/a"), None)
            .await
            .expect("delete")
            .revision(),
    );
    revisions.push(
        store
            .update(b("/b"), b("2"), Some(Revision(3)))
            .await
            .expect("update")
            .mod_revision,
    );
    revisions.push(
        store
            .delete(b("/b"), Some(Revision(5)))
            .await
            .expect("delete")
            .revision(),
    );
    revisions.push(
        store
            .create(b("/a"), b("3"))
            .await
            .expect("create")
            .mod_revision,
    );
    assert_eq!(revisions, (1..=7).map(Revision).collect::<Vec<_>>());
    assert_eq!(current(&store).await, Revision(7));
}

/// Writes that fail (every error a write can give) change nothing and consume no revision.
pub async fn failed_writes_should_consume_no_revision<S: Store>(store: S) {
    let a = store.create(b("/a"), b("1")).await.expect("create");
    let big = Bytes::from(vec![7; TOO_LARGE]);
    let failures: Vec<crate::Result<()>> = vec![
        store.create(b("/a"), b("2")).await.map(drop),
        store.update(b("/missing"), b("2"), None).await.map(drop),
        store
            .update(b("/missing"), b("2"), Some(Revision(1)))
            .await
            .map(drop),
        store.delete(b("/missing"), None).await.map(drop),
        store
            .delete(b("/missing"), Some(Revision(1)))
            .await
            .map(drop),
        store
            .update(b("/a"), b("2"), Some(Revision(5)))
            .await
            .map(drop),
        store.delete(b("/a"), Some(Revision(5))).await.map(drop),
        store.create(Bytes::new(), b("2")).await.map(drop),
        store.update(Bytes::new(), b("2"), None).await.map(drop),
        store.delete(Bytes::new(), None).await.map(drop),
        store.create(b("/big"), big.clone()).await.map(drop),
        store.update(b("/a"), big, None).await.map(drop),
    ];
    for (i, failure) in failures.iter().enumerate() {
        assert!(failure.is_err(), "failing write #{i} succeeded");
    }
    assert_eq!(current(&store).await, Revision(1));
    assert_eq!(store.get(b"/a").await.expect("get"), Some(a));
    assert_eq!(store.get(b"/big").await.expect("get"), None);
    assert_eq!(store.count(b"").await.expect("count"), 1);
    let b_kv = store.create(b("/b"), b("1")).await.expect("create");
    assert_eq!(
        b_kv.mod_revision,
        Revision(2),
        "the next write takes the next revision"
    );
}

/// Creating a key that exists fails with `AlreadyExists` carrying its current value.
pub async fn create_of_an_existing_key_should_fail_with_the_current_value<S: Store>(store: S) {
    store.create(b("/a"), b("1")).await.expect("create");
    let updated = store.update(b("/a"), b("2"), None).await.expect("update");
    match store.create(b("/a"), b("3")).await {
        Err(StoreError::AlreadyExists { current }) => assert_eq!(*current, updated),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(store.get(b"/a").await.expect("get"), Some(updated));
}

/// A create returns version 1 with create = mod revision; each update keeps the create
/// revision, takes the write's revision as mod revision and adds one to the version. Values are
/// stored byte for byte, including empty and non-UTF-8 ones.
pub async fn updates_should_keep_the_create_revision_and_bump_the_version<S: Store>(store: S) {
    let created = store.create(b("/a"), b("v1")).await.expect("create");
    assert_eq!(created, kv("/a", "v1", 1, 1, 1));
    store.create(b("/other"), b("x")).await.expect("create");
    let second = store.update(b("/a"), b("v2"), None).await.expect("update");
    assert_eq!(second, kv("/a", "v2", 1, 3, 2));
    let binary = b([0u8, 0xff, 0x80, b'\n', 0]);
    let third = store
        .update(b("/a"), binary.clone(), Some(Revision(3)))
        .await
        .expect("update");
    assert_eq!(third.value, binary);
    assert_eq!(
        (third.create_revision, third.mod_revision, third.version),
        (Revision(1), Revision(4), 3)
    );
    let empty = store
        .update(b("/a"), Bytes::new(), None)
        .await
        .expect("update to an empty value");
    assert_eq!(empty, kv("/a", "", 1, 5, 4));
    assert_eq!(store.get(b"/a").await.expect("get"), Some(empty));
}

/// An update with an expected revision applies only if the key's mod revision equals it;
/// otherwise it fails with `Conflict` carrying the expected revision and the current value.
pub async fn update_with_expected_revision_should_apply_only_on_match<S: Store>(store: S) {
    store.create(b("/a"), b("1")).await.expect("create");
    let second = store
        .update(b("/a"), b("2"), Some(Revision(1)))
        .await
        .expect("matching update");
    assert_eq!(second, kv("/a", "2", 1, 2, 2));
    expect_conflict(
        store.update(b("/a"), b("3"), Some(Revision(1))).await,
        1,
        &second,
    );
    expect_conflict(
        store.update(b("/a"), b("3"), Some(Revision(0))).await,
        0,
        &second,
    );
    expect_conflict(
        store.update(b("/a"), b("3"), Some(Revision(9))).await,
        9,
        &second,
    );
    assert_eq!(store.get(b"/a").await.expect("get"), Some(second));
    let third = store
        .update(b("/a"), b("3"), Some(Revision(2)))
        .await
        .expect("matching update");
    assert_eq!(third, kv("/a", "3", 1, 3, 3));
}

/// A delete with an expected revision applies only if the key's mod revision equals it;
/// otherwise it fails with `Conflict` and the key stays.
pub async fn delete_with_expected_revision_should_apply_only_on_match<S: Store>(store: S) {
    store.create(b("/a"), b("1")).await.expect("create");
    let second = store.update(b("/a"), b("2"), None).await.expect("update");
    expect_conflict(store.delete(b("/a"), Some(Revision(1))).await, 1, &second);
    expect_conflict(store.delete(b("/a"), Some(Revision(3))).await, 3, &second);
    assert_eq!(store.get(b"/a").await.expect("get"), Some(second.clone()));
    let deleted = store
        .delete(b("/a"), Some(Revision(2)))
        .await
        .expect("matching delete");
    assert_eq!(deleted.prev, Some(second));
    assert_eq!(deleted.revision(), Revision(3));
    assert_eq!(store.get(b"/a").await.expect("get"), None);
}

/// Updating or deleting a key that does not exist (never did, or was deleted, or only has
/// longer keys under it) fails with `NotFound`, whatever the expected revision.
pub async fn update_or_delete_of_a_missing_key_should_fail_with_not_found<S: Store>(store: S) {
    for expected in [None, Some(Revision(0)), Some(Revision(1))] {
        expect_not_found(store.update(b("/a"), b("1"), expected).await);
        expect_not_found(store.delete(b("/a"), expected).await);
    }
    store.create(b("/a"), b("1")).await.expect("create");
    store.delete(b("/a"), None).await.expect("delete");
    store.create(b("/a/b"), b("1")).await.expect("create");
    for expected in [None, Some(Revision(1)), Some(Revision(2))] {
        expect_not_found(store.update(b("/a"), b("1"), expected).await);
        expect_not_found(store.delete(b("/a"), expected).await);
        expect_not_found(store.update(b("/a/"), b("1"), expected).await);
    }
    assert_eq!(current(&store).await, Revision(3));
}

/// A delete returns its event: kind `Delete`, the key with an empty value, the deleted
/// incarnation's create revision and version, the deletion's revision as mod revision, and the
/// deleted key-value as `prev`. The key is then gone from `get`, `count` and `list`.
pub async fn delete_should_return_the_deleted_value_and_the_deletion_revision<S: Store>(store: S) {
    store.create(b("/a"), b("1")).await.expect("create");
    let second = store.update(b("/a"), b("2"), None).await.expect("update");
    let other = store.create(b("/b"), b("1")).await.expect("create");
    let deleted = store.delete(b("/a"), None).await.expect("delete");
    assert_eq!(
        deleted,
        Event {
            kind: EventKind::Delete,
            kv: kv("/a", "", 1, 4, 2),
            prev: Some(second),
        }
    );
    assert_eq!(store.get(b"/a").await.expect("get"), None);
    assert_eq!(store.count(b"").await.expect("count"), 1);
    let listed = store.list(ListRequest::prefix("")).await.expect("list");
    assert_eq!(listed.kvs, vec![other]);
    assert_eq!(current(&store).await, Revision(4));
}

/// A key deleted and created again is a new incarnation: new create revision, version 1.
pub async fn recreated_key_should_start_a_new_incarnation<S: Store>(store: S) {
    store.create(b("/a"), b("1")).await.expect("create");
    store.update(b("/a"), b("2"), None).await.expect("update");
    store.delete(b("/a"), None).await.expect("delete");
    let again = store.create(b("/a"), b("3")).await.expect("create again");
    assert_eq!(again, kv("/a", "3", 4, 4, 1));
    let updated = store
        .update(b("/a"), b("4"), Some(Revision(4)))
        .await
        .expect("update");
    assert_eq!(updated, kv("/a", "4", 4, 5, 2));
    let deleted = store.delete(b("/a"), None).await.expect("delete");
    assert_eq!(deleted.kv, kv("/a", "", 4, 6, 2));
}

/// `get` returns the current value of exactly that key (not of keys it is a prefix of), and
/// `None` for a missing one.
pub async fn get_should_return_the_current_value_or_none<S: Store>(store: S) {
    assert_eq!(store.get(b"/a").await.expect("get"), None);
    let nested = store.create(b("/a/b"), b("x")).await.expect("create");
    store.create(b("/a0"), b("y")).await.expect("create");
    let odd = store
        .create(b([0u8, 0xff, b'/']), Bytes::new())
        .await
        .expect("create");
    for missing in [&b"/a"[..], b"/a/", b"/a/b/", b"/a/bb", b"/"] {
        assert_eq!(
            store.get(missing).await.expect("get"),
            None,
            "get {missing:?}"
        );
    }
    assert_eq!(store.get(b"/a/b").await.expect("get"), Some(nested));
    assert_eq!(store.get(&[0u8, 0xff, b'/']).await.expect("get"), Some(odd));
    let updated = store.update(b("/a/b"), b("z"), None).await.expect("update");
    assert_eq!(store.get(b"/a/b").await.expect("get"), Some(updated));
}

/// `count` counts the keys that exist now under a prefix, byte-wise (so `/a/` does not count
/// `/a0` or `/ab`).
pub async fn count_should_count_the_keys_under_a_prefix_now<S: Store>(store: S) {
    assert_eq!(store.count(b"").await.expect("count"), 0);
    for key in ["/a/1", "/a/2", "/a/3", "/a0", "/ab", "/a", "/b/1"] {
        store.create(b(key), b("v")).await.expect("create");
    }
    let counts = [
        ("/a/", 3),
        ("/a", 6),
        ("", 7),
        ("/c/", 0),
        ("/a/1", 1),
        ("/b", 1),
    ];
    for (prefix, expected) in counts {
        assert_eq!(
            store.count(prefix.as_bytes()).await.expect("count"),
            expected,
            "count {prefix:?}"
        );
    }
    store.delete(b("/a/2"), None).await.expect("delete");
    store.update(b("/a/1"), b("w"), None).await.expect("update");
    assert_eq!(store.count(b"/a/").await.expect("count"), 2);
    assert_eq!(store.count(b"").await.expect("count"), 6);
}

/// Writes to the empty key are invalid arguments and change nothing.
pub async fn empty_keys_should_be_invalid_arguments<S: Store>(store: S) {
    let results = [
        store.create(Bytes::new(), b("v")).await.map(drop),
        store.update(Bytes::new(), b("v"), None).await.map(drop),
        store
            .update(Bytes::new(), b("v"), Some(Revision(0)))
            .await
            .map(drop),
        store.delete(Bytes::new(), None).await.map(drop),
    ];
    for result in results {
        assert!(
            matches!(result, Err(StoreError::InvalidArgument(_))),
            "expected InvalidArgument, got {result:?}"
        );
    }
    assert_eq!(current(&store).await, Revision(0));
}

/// A value over the backend's limit (at most 4 MiB) fails with `ValueTooLarge` giving its size
/// and the limit, on create and update; a value of exactly the limit is stored.
pub async fn values_over_the_limit_should_be_refused<S: Store>(store: S) {
    let big = Bytes::from(vec![1; TOO_LARGE]);
    let limit = match store.create(b("/a"), big.clone()).await {
        Err(StoreError::ValueTooLarge { size, limit }) => {
            assert_eq!(size, TOO_LARGE);
            assert!(
                limit < size,
                "limit {limit} is not below the refused size {size}"
            );
            limit
        }
        other => panic!("expected ValueTooLarge, got {other:?}"),
    };
    let at_limit = store
        .create(b("/a"), Bytes::from(vec![2; limit]))
        .await
        .expect("a value at the limit");
    assert_eq!(at_limit.mod_revision, Revision(1));
    match store.update(b("/a"), big, None).await {
        Err(StoreError::ValueTooLarge { size, limit: l }) => {
            assert_eq!((size, l), (TOO_LARGE, limit))
        }
        other => panic!("expected ValueTooLarge, got {other:?}"),
    }
    let got = store.get(b"/a").await.expect("get").expect("the key");
    assert_eq!(got.value.len(), limit);
    assert_eq!(current(&store).await, Revision(1));
}

/// Many tasks incrementing one counter with read-then-conditional-update lose no increment:
/// conditional writes are linearizable, and conflicts consume no revision.
pub async fn conditional_updates_under_contention_should_lose_no_write<S: Store>(store: S) {
    const TASKS: u64 = 16;
    const INCREMENTS: u64 = 20;
    let store = Arc::new(store);
    store.create(b("/counter"), b("0")).await.expect("create");
    let mut tasks = JoinSet::new();
    for _ in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            for _ in 0..INCREMENTS {
                loop {
                    let now = store
                        .get(b"/counter")
                        .await
                        .expect("get")
                        .expect("the counter");
                    let n: u64 = std::str::from_utf8(&now.value)
                        .expect("utf-8")
                        .parse()
                        .expect("a number");
                    match store
                        .update(
                            b("/counter"),
                            b((n + 1).to_string()),
                            Some(now.mod_revision),
                        )
                        .await
                    {
                        Ok(_) => break,
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(e) => panic!("update failed: {e}"),
                    }
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let counter = store
        .get(b"/counter")
        .await
        .expect("get")
        .expect("the counter");
    assert_eq!(counter.value, b((TASKS * INCREMENTS).to_string()));
    assert_eq!(counter.version, 1 + TASKS * INCREMENTS);
    assert_eq!(current(&*store).await, Revision(1 + TASKS * INCREMENTS));
}
