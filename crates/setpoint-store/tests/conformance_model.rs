//! The conformance suite run against the reference model, [`ModelStore`].

use setpoint_store::conformance::Fixture;
use setpoint_store::ModelStore;

setpoint_store::conformance_tests!(|| async { Fixture::new(ModelStore::new()) });
