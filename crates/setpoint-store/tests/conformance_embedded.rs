//! The conformance suite run against the embedded store, on disk (in a temporary directory) and
//! in memory, both without automatic compaction (the suite compacts by hand).

use setpoint_store::conformance::Fixture;
use setpoint_store::{EmbeddedConfig, EmbeddedStore};

mod on_disk {
    use super::*;

    setpoint_store::conformance_tests!(|| async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = EmbeddedConfig::on_disk(dir.path()).without_auto_compaction();
        Fixture::with_guard(EmbeddedStore::open(config).expect("open the store"), dir)
    });
}

mod in_memory {
    use super::*;

    setpoint_store::conformance_tests!(|| async {
        let config = EmbeddedConfig::in_memory().without_auto_compaction();
        Fixture::new(EmbeddedStore::open(config).expect("open the store"))
    });
}
