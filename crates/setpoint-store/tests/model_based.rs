//! Model-based tests: seeded random operations applied to the embedded store and to the
//! reference model, every answer compared (see `setpoint_store::conformance::ModelCheck`).
//!
//! Each test runs several random seeds, printed as they start; `SETPOINT_SEED=<seed>` runs just
//! that one (`cargo test -p setpoint-store --test integration model_based -- --nocapture` shows them).

use std::path::PathBuf;

use setpoint_store::conformance::{seeds_from_env, ModelCheck};
use setpoint_store::{EmbeddedConfig, EmbeddedStore, ModelStore};

/// Seeds per test when `SETPOINT_SEED` is not set.
const SEEDS: usize = 4;
/// Operations per seed.
const STEPS: usize = 3_000;

/// The harness itself: the model compared with a second model must always agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_should_agree_with_itself() {
    for seed in seeds_from_env(SEEDS) {
        println!("model vs model: seed {seed}");
        ModelCheck::new(seed)
            .steps(STEPS)
            .run(ModelStore::new())
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_in_memory_should_agree_with_the_model() {
    for seed in seeds_from_env(SEEDS) {
        println!("embedded in memory vs model: seed {seed}");
        let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction())
            .expect("open");
        ModelCheck::new(seed).steps(STEPS).run(store).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_on_disk_should_agree_with_the_model_across_restarts() {
    for seed in seeds_from_env(SEEDS) {
        println!("embedded on disk vs model, with restarts: seed {seed}");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = EmbeddedConfig::on_disk(dir.path()).without_auto_compaction();
        let store = EmbeddedStore::open(config.clone()).expect("open");
        ModelCheck::new(seed)
            .steps(STEPS)
            .restart_with(move |store| reopen(store, config.clone()))
            .run(store)
            .await;
        drop(dir);
    }
}

/// Closes `store` and opens it again from `config`'s directory, off the async threads (closing
/// waits for writes in flight).
async fn reopen(store: EmbeddedStore, config: EmbeddedConfig) -> EmbeddedStore {
    let dir: Option<PathBuf> = config.dir.clone();
    tokio::task::spawn_blocking(move || {
        store.close();
        drop(store);
        EmbeddedStore::open(config)
    })
    .await
    .expect("the reopen task")
    .unwrap_or_else(|e| panic!("reopen the store in {dir:?}: {e}"))
}

/// The etcd backend against the model, each seed on its own local etcd member (see
/// `conformance_etcd.rs` for what it needs installed).
#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_should_agree_with_the_model() {
    for seed in seeds_from_env(1) {
        println!("etcd vs model: seed {seed}");
        let etcd = setpoint_store::LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"));
        let store = setpoint_store::EtcdStore::connect(etcd.config().without_auto_compaction())
            .await
            .unwrap_or_else(|e| panic!("connecting to the local etcd: {e}"));
        ModelCheck::new(seed).steps(STEPS).run(store).await;
        drop(etcd);
    }
}
