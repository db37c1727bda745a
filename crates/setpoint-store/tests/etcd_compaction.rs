//! The etcd backend's background compactor: two stores on one etcd (as two API servers) take
//! turns through `/registry/compact_rev_key`, history gets compacted, current values stay.

#![cfg(feature = "etcd")]

use std::time::{Duration, Instant};

use bytes::Bytes;
use setpoint_store::{
    EtcdStore, ListRequest, LocalEtcd, Revision, Store, StoreError, COMPACT_REV_KEY,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_should_take_turns_compacting_and_keep_current_values() {
    let etcd = LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"));
    let mut config = etcd.config();
    config.compaction_interval = Some(Duration::from_millis(100));
    let first = EtcdStore::connect(config.clone()).await.expect("connect");
    let second = EtcdStore::connect(config).await.expect("connect");
    let a = first
        .create(Bytes::from_static(b"/registry/a"), Bytes::from_static(b"1"))
        .await
        .expect("create");
    let a = second
        .update(
            Bytes::from_static(b"/registry/a"),
            Bytes::from_static(b"2"),
            Some(a.mod_revision),
        )
        .await
        .expect("update");

    // Poll (with a deadline) until history up to the update has been compacted away.
    let deadline = Instant::now() + Duration::from_secs(30);
    let compacted = loop {
        match first
            .list(ListRequest::prefix("/registry/a").at(Revision(a.mod_revision.get() - 1)))
            .await
        {
            Err(StoreError::Compacted { compacted, .. }) => break compacted,
            Ok(_) => {}
            Err(e) => panic!("list at an old revision: {e}"),
        }
        assert!(Instant::now() < deadline, "nothing was compacted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(compacted >= a.mod_revision, "compacted to {compacted}");

    // Both compactors have run: the key's version counts every turn taken.
    let key = first
        .get(COMPACT_REV_KEY)
        .await
        .expect("get")
        .expect("the compaction key");
    assert!(key.version >= 2, "{key:?}");
    assert_eq!(
        first.get(b"/registry/a").await.expect("get"),
        Some(a.clone())
    );
    assert_eq!(second.count(b"/registry/a").await.expect("count"), 1);
}
