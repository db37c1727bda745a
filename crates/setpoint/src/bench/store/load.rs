//! What the store benchmarks share: workload sizes, opening and closing a store in a fresh
//! directory, 1 KiB values, an operation budget that concurrent writers draw from, bulk
//! loading, and measuring a directory's size.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use setpoint_store::{EmbeddedConfig, EmbeddedStore, Revision, Store};

use crate::cli::StoreKind;

/// The size of every benchmark value.
pub(super) const VALUE_BYTES: usize = 1024;

/// How much work each benchmark does: the full sizes, or smaller ones for `--quick`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sizes {
    /// Operations per write measurement (creates, then updates, per concurrency level).
    pub(super) write_ops: u64,
    /// Time limit per write measurement, whichever of the two comes first.
    pub(super) write_time: Duration,
    /// Timed repetitions of each list.
    pub(super) list_repetitions: usize,
    /// Writes the watchers follow.
    pub(super) watch_writes: u64,
    /// Time limit for those writes.
    pub(super) watch_time: Duration,
    /// Updates of the file-size run.
    pub(super) size_updates: u64,
    /// Time limit for those updates.
    pub(super) size_time: Duration,
}

impl Sizes {
    /// The full sizes, or the `--quick` ones.
    pub(super) fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                write_ops: 20_000,
                write_time: Duration::from_secs(1),
                list_repetitions: 20,
                watch_writes: 10_000,
                watch_time: Duration::from_secs(10),
                size_updates: 100_000,
                size_time: Duration::from_secs(120),
            }
        } else {
            Sizes {
                write_ops: 100_000,
                write_time: Duration::from_secs(3),
                list_repetitions: 50,
                watch_writes: 50_000,
                watch_time: Duration::from_secs(30),
                size_updates: 1_000_000,
                size_time: Duration::from_secs(900),
            }
        }
    }
}

/// The store under benchmark, shared by its writers and readers.
pub(super) type BenchStore = Arc<dyn Store>;

/// An opened store and what must be shut down with it.
pub(super) struct Opened {
    /// The store.
    pub(super) store: BenchStore,
    held: Held,
}

enum Held {
    Embedded(EmbeddedStore),
    #[cfg(feature = "etcd")]
    Etcd(setpoint_store::LocalEtcd),
}

/// Opens a durable store with the default settings in `dir`, which must not hold one yet: the
/// embedded store, or a fresh local etcd member (fsyncs on) with its data under `dir`.
pub(super) async fn open(dir: &Path, kind: StoreKind) -> Result<Opened> {
    match kind {
        StoreKind::Embedded => {
            let store = open_embedded(dir).await?;
            Ok(Opened {
                store: Arc::new(store.clone()),
                held: Held::Embedded(store),
            })
        }
        StoreKind::Etcd => open_etcd(dir).await,
    }
}

/// Opens a durable embedded store with the default settings in `dir`.
pub(super) async fn open_embedded(dir: &Path) -> Result<EmbeddedStore> {
    let config = EmbeddedConfig::on_disk(dir);
    tokio::task::spawn_blocking(move || EmbeddedStore::open(config))
        .await?
        .with_context(|| format!("opening the embedded store in {}", dir.display()))
}

/// Closes an embedded store, waiting for its writes in flight and background tasks, off the
/// async threads.
pub(super) async fn close_embedded(store: EmbeddedStore) -> Result<()> {
    tokio::task::spawn_blocking(move || store.close()).await?;
    Ok(())
}

#[cfg(feature = "etcd")]
async fn open_etcd(dir: &Path) -> Result<Opened> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let parent = dir.to_owned();
    let etcd =
        tokio::task::spawn_blocking(move || setpoint_store::LocalEtcd::start_durable_in(&parent))
            .await??;
    let store = setpoint_store::EtcdStore::connect(etcd.config().without_auto_compaction())
        .await
        .context("connecting to the local etcd")?;
    Ok(Opened {
        store: Arc::new(store),
        held: Held::Etcd(etcd),
    })
}

#[cfg(not(feature = "etcd"))]
async fn open_etcd(_dir: &Path) -> Result<Opened> {
    anyhow::bail!(
        "this setpoint was built without etcd support: rebuild with `cargo build --release --features etcd` (needs `protoc`, Debian package protobuf-compiler)"
    )
}

/// Closes the store, waiting for its writes in flight and background tasks, off the async
/// threads (a local etcd member is stopped).
pub(super) async fn close(opened: Opened) -> Result<()> {
    drop(opened.store);
    match opened.held {
        Held::Embedded(store) => close_embedded(store).await?,
        #[cfg(feature = "etcd")]
        Held::Etcd(etcd) => tokio::task::spawn_blocking(move || drop(etcd)).await?,
    }
    Ok(())
}

/// A 1 KiB value of printable pseudo-random bytes (incompressible enough, the same every run).
pub(super) fn value() -> Bytes {
    let mut rng = SmallRng::seed_from_u64(0x5e7_901);
    (0..VALUE_BYTES)
        .map(|_| rng.gen_range(b'a'..=b'z'))
        .collect::<Vec<u8>>()
        .into()
}

/// A budget of operations that concurrent writers draw from until it, or the time, runs out.
pub(super) struct Budget {
    /// Operations handed out so far (may overshoot `ops` by one per writer; those are refused).
    taken: AtomicU64,
    /// Most operations to hand out.
    ops: u64,
    /// No operation is handed out after this instant.
    deadline: Instant,
}

impl Budget {
    /// At most `ops` operations, none after `time` from now.
    pub(super) fn new(ops: u64, time: Duration) -> Arc<Self> {
        Arc::new(Budget {
            taken: AtomicU64::new(0),
            ops,
            deadline: Instant::now() + time,
        })
    }

    /// Takes one operation: its index across all writers, or `None` once the budget is spent.
    pub(super) fn take(&self) -> Option<u64> {
        if Instant::now() >= self.deadline {
            return None;
        }
        let n = self.taken.fetch_add(1, Ordering::Relaxed);
        (n < self.ops).then_some(n)
    }
}

/// The key of object `i` under `prefix`; zero-padded so that key order is index order.
pub(super) fn object_key(prefix: &str, i: u64) -> Bytes {
    Bytes::from(format!("{prefix}obj-{i:06}"))
}

/// Creates the objects `0..n` under `prefix` with `writers` concurrent writers and returns each
/// one's mod revision, by index. Untimed setup for the benchmarks that need existing keys.
pub(super) async fn populate(
    store: &BenchStore,
    prefix: &str,
    n: u64,
    writers: usize,
) -> Result<Vec<Revision>> {
    let budget = Budget::new(n, Duration::from_secs(3600));
    let value = value();
    let mut tasks = Vec::with_capacity(writers);
    for _ in 0..writers {
        let (store, budget, value, prefix) = (
            store.clone(),
            budget.clone(),
            value.clone(),
            prefix.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let mut created = Vec::new();
            while let Some(i) = budget.take() {
                let kv = store.create(object_key(&prefix, i), value.clone()).await?;
                created.push((i, kv.mod_revision));
            }
            anyhow::Ok(created)
        }));
    }
    let mut revisions = vec![Revision::ZERO; usize::try_from(n)?];
    for task in tasks {
        for (i, revision) in task.await?.context("creating the benchmark's objects")? {
            revisions[usize::try_from(i)?] = revision;
        }
    }
    Ok(revisions)
}

/// The size of the files under `dir`, recursively: apparent (file lengths) and allocated (disk
/// blocks) bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct DirSize {
    /// The sum of the files' lengths.
    pub(super) apparent: u64,
    /// The disk space the files occupy.
    pub(super) allocated: u64,
}

/// Measures `dir`. Files that vanish while it is walked (the store deletes old segments and
/// snapshots) are skipped.
pub(super) fn dir_size(dir: &Path) -> Result<DirSize> {
    use std::os::unix::fs::MetadataExt;

    let mut size = DirSize::default();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
            let metadata = match entry.metadata() {
                Ok(metadata) => metadata,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("reading {}", entry.path().display()))
                }
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else {
                size.apparent += metadata.len();
                size.allocated += metadata.blocks() * 512;
            }
        }
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_should_hand_out_each_operation_once() {
        let budget = Budget::new(3, Duration::from_secs(60));
        let taken: Vec<_> = std::iter::from_fn(|| budget.take()).collect();
        assert_eq!(taken, [0, 1, 2]);
        assert_eq!(budget.take(), None);
    }

    #[test]
    fn budget_should_stop_at_its_deadline() {
        let budget = Budget::new(u64::MAX, Duration::ZERO);
        assert_eq!(budget.take(), None);
    }

    #[test]
    fn object_keys_should_sort_by_index() {
        assert!(object_key("/p/", 9) < object_key("/p/", 10));
        assert_eq!(&object_key("/p/", 7)[..], b"/p/obj-000007");
    }

    #[test]
    fn dir_size_should_sum_nested_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("a"), [0u8; 100]).expect("write");
        std::fs::write(dir.path().join("sub/b"), [0u8; 23]).expect("write");
        assert_eq!(dir_size(dir.path()).expect("size").apparent, 123);
    }

    #[test]
    fn value_should_be_one_kibibyte() {
        assert_eq!(value().len(), VALUE_BYTES);
    }
}
