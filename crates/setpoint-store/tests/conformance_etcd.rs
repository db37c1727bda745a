//! The conformance suite run against the etcd backend: each case on its own local etcd member
//! (revisions are global to an etcd cluster, and the suite counts them from an empty store),
//! without automatic compaction (the suite compacts by hand). Needs the `etcd` binary (on the
//! PATH or in `SETPOINT_ETCD`); fails, naming what to install, without it.

#![cfg(feature = "etcd")]

use setpoint_store::conformance::Fixture;
use setpoint_store::{EtcdStore, LocalEtcd};

setpoint_store::conformance_tests!(|| async {
    let etcd = LocalEtcd::start().unwrap_or_else(|e| panic!("{e}"));
    let config = etcd.config().without_auto_compaction();
    let store = EtcdStore::connect(config)
        .await
        .unwrap_or_else(|e| panic!("connecting to the local etcd: {e}"));
    Fixture::with_guard(store, etcd)
});
