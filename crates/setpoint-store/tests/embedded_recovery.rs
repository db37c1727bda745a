//! Recovery of the embedded store from its directory: restarts, torn tails, corruption,
//! snapshots replacing log segments, and the directory lock.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use setpoint_store::{EmbeddedConfig, EmbeddedStore, ListRequest, Revision, Store, StoreError};

fn config(dir: &Path) -> EmbeddedConfig {
    EmbeddedConfig::on_disk(dir).without_auto_compaction()
}

fn b(s: impl AsRef<str>) -> Bytes {
    Bytes::copy_from_slice(s.as_ref().as_bytes())
}

fn files_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// Writes keys /k/0../k/{n-1}, then updates each once: 2n revisions.
async fn fill(store: &EmbeddedStore, n: usize) {
    for i in 0..n {
        store
            .create(b(format!("/k/{i}")), b(format!("v{i}")))
            .await
            .unwrap();
    }
    for i in 0..n {
        store
            .update(b(format!("/k/{i}")), b(format!("w{i}")), None)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn reopen_should_restore_values_revisions_and_history() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(config(dir.path())).unwrap();
        fill(&store, 20).await;
        store.delete(b("/k/3"), None).await.unwrap();
        store.close();
    }
    let store = EmbeddedStore::open(config(dir.path())).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), Revision(41));
    let kv = store.get(b"/k/5").await.unwrap().unwrap();
    assert_eq!(
        (kv.value, kv.create_revision, kv.mod_revision, kv.version),
        (b("w5"), Revision(6), Revision(26), 2)
    );
    assert!(store.get(b"/k/3").await.unwrap().is_none());
    // History survives the restart: the state at revision 20 and every event after 0.
    let old = store
        .list(ListRequest::prefix("/k/").at(Revision(20)))
        .await
        .unwrap();
    assert_eq!(old.kvs.len(), 20);
    assert!(old.kvs.iter().all(|kv| kv.value.starts_with(b"v")));
    let mut watch = store.watch(b("/k/"), Revision::ZERO).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 41 {
        let batch = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.extend(batch.events.iter().map(|e| e.revision().get()));
    }
    assert_eq!(seen, (1..=41).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_torn_final_write_should_be_discarded_and_the_log_continue() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(config(dir.path())).unwrap();
        fill(&store, 5).await;
    }
    // The write in flight at the crash: a frame header announcing 100 bytes, followed by only
    // some of them, where the next frame goes (after the last non-zero byte: the segment is
    // preallocated with zeros).
    let segment = files_with(dir.path(), ".log").pop().unwrap();
    let bytes = fs::read(&segment).unwrap();
    let end = bytes.iter().rposition(|b| *b != 0).unwrap() as u64 + 1;
    let f = OpenOptions::new().write(true).open(&segment).unwrap();
    let mut torn = 100u32.to_le_bytes().to_vec();
    torn.extend_from_slice(&[7u8; 30]);
    f.write_all_at(&torn, end).unwrap();
    drop(f);
    {
        let store = EmbeddedStore::open(config(dir.path())).unwrap();
        assert_eq!(store.current_revision().await.unwrap(), Revision(10));
        let after = fs::read(&segment).unwrap();
        assert!(
            after[end as usize..].iter().all(|b| *b == 0),
            "torn tail cut off"
        );
        store.create(b("/k/new"), b("x")).await.unwrap();
    }
    let store = EmbeddedStore::open(config(dir.path())).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), Revision(11));
    assert_eq!(
        store.get(b"/k/new").await.unwrap().unwrap().mod_revision,
        Revision(11)
    );
}

#[tokio::test]
async fn a_zero_filled_tail_should_be_discarded() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(config(dir.path())).unwrap();
        fill(&store, 3).await;
    }
    let segment = files_with(dir.path(), ".log").pop().unwrap();
    let f = OpenOptions::new().append(true).open(&segment).unwrap();
    f.write_all_at(&[0u8; 4096], f.metadata().unwrap().len())
        .unwrap();
    drop(f);
    let store = EmbeddedStore::open(config(dir.path())).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), Revision(6));
}

#[tokio::test]
async fn corruption_inside_the_log_should_fail_open_not_serve_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(config(dir.path())).unwrap();
        fill(&store, 10).await;
    }
    let segment = files_with(dir.path(), ".log").pop().unwrap();
    let mut bytes = fs::read(&segment).unwrap();
    let at = bytes.windows(2).position(|w| w == b"v4").unwrap();
    bytes[at + 1] = b'X';
    fs::write(&segment, &bytes).unwrap();
    match EmbeddedStore::open(config(dir.path())) {
        Err(StoreError::Corrupt(msg)) => assert!(msg.contains("checksum"), "{msg}"),
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("opened a corrupt store"),
    }
}

#[tokio::test]
async fn snapshots_should_replace_old_segments_and_bound_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = EmbeddedConfig::on_disk(dir.path());
    cfg.segment_bytes = 16 << 10;
    cfg.history_revisions = 50;
    cfg.history_min_revisions = 10;
    cfg.compaction_interval = Some(Duration::from_millis(5));
    let value = Bytes::from(vec![b'x'; 512]);
    let mut sizes = Vec::new();
    {
        let store = EmbeddedStore::open(cfg.clone()).unwrap();
        for round in 0..40 {
            for k in 0..20 {
                let key = b(format!("/k/{k}"));
                if round == 0 {
                    store.create(key, value.clone()).await.unwrap();
                } else {
                    store.update(key, value.clone(), None).await.unwrap();
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            sizes.push(store.disk_bytes());
        }
        // 800 writes of 512 bytes: ~400 KiB of log without snapshots.
        let last = *sizes.last().unwrap();
        assert!(last < 150 << 10, "files not bounded: {sizes:?}");
        assert!(
            store.compacted_revision() > Revision(700),
            "{}",
            store.compacted_revision()
        );
        store.close(); // the compactor may be between writing a snapshot and removing the old one
        assert_eq!(files_with(dir.path(), ".snap").len(), 1);
    }
    let store = EmbeddedStore::open(cfg.without_auto_compaction()).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), Revision(800));
    assert_eq!(store.count(b"/k/").await.unwrap(), 20);
    let kv = store.get(b"/k/7").await.unwrap().unwrap();
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version),
        (Revision(8), Revision(788), 40)
    );
    // History from the snapshot on is still there after the restart.
    let compacted = store.compacted_revision();
    assert!(compacted < Revision(800));
    let at = store
        .list(ListRequest::prefix("/k/").at(compacted))
        .await
        .unwrap();
    assert_eq!(at.kvs.len(), 20);
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

// Regression (issue 14.15): the log files were created 0644, and a data directory that already
// existed with 0755 was used as it was.
#[tokio::test]
async fn every_store_file_should_be_private_and_an_open_directory_tightened() {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("store");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let mut cfg = EmbeddedConfig::on_disk(&dir);
    cfg.segment_bytes = 16 << 10;
    cfg.history_revisions = 20;
    cfg.history_min_revisions = 5;
    cfg.compaction_interval = Some(Duration::from_millis(5));
    {
        let store = EmbeddedStore::open(cfg.clone()).unwrap();
        assert_eq!(mode(&dir), 0o700, "an open directory is tightened");
        fill(&store, 200).await; // several segments
        for _ in 0..500 {
            if !files_with(&dir, ".snap").is_empty() {
                break;
            }
            store.update(b("/k/0"), b("again"), None).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        store.close();
    }
    assert!(
        !files_with(&dir, ".snap").is_empty(),
        "no snapshot was written"
    );
    for path in files_with(&dir, "") {
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    // A file left readable by others (an older version, or a user) is tightened at open.
    let segment = files_with(&dir, ".log").pop().unwrap();
    fs::set_permissions(&segment, fs::Permissions::from_mode(0o644)).unwrap();
    let store = EmbeddedStore::open(cfg.without_auto_compaction()).unwrap();
    assert_eq!(mode(&segment), 0o600);
    store.close();
}

#[tokio::test]
async fn a_second_process_should_not_open_a_directory_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let _store = EmbeddedStore::open(config(dir.path())).unwrap();
    match EmbeddedStore::open(config(dir.path())) {
        Err(StoreError::Unavailable(msg)) => assert!(msg.contains("in use"), "{msg}"),
        other => panic!("expected Unavailable, got {:?}", other.err()),
    }
}

#[tokio::test]
async fn close_should_end_watches_and_refuse_requests() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(config(dir.path())).unwrap();
    store.create(b("/a"), b("1")).await.unwrap();
    let mut watch = store.watch(b("/"), Revision::ZERO).await.unwrap();
    store.close();
    let batch = watch.next().await.unwrap().unwrap();
    assert_eq!(
        batch.events.len(),
        1,
        "what was committed before close is delivered"
    );
    assert!(tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .is_none());
    assert!(matches!(
        store.create(b("/b"), b("2")).await,
        Err(StoreError::Unavailable(_))
    ));
}

#[tokio::test]
async fn a_watcher_overtaken_by_compaction_should_end_with_compacted() {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap();
    let mut watch = store.watch(b("/"), Revision::ZERO).await.unwrap();
    for i in 0..10 {
        store.create(b(format!("/{i}")), b("v")).await.unwrap();
    }
    store.compact(Revision(5)).await.unwrap();
    match watch.next().await {
        Some(Err(StoreError::Compacted {
            requested,
            compacted,
        })) => {
            assert_eq!((requested, compacted), (Revision(0), Revision(5)));
        }
        other => panic!("expected Compacted, got {other:?}"),
    }
    assert!(watch.next().await.is_none());
}
