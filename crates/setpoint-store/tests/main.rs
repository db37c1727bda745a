//! This crate's integration tests, as one binary: a build links it once, not once per file.
//! Each module covers one area; `cargo test -p setpoint-store --test integration MODULE::` runs one.

mod conformance_embedded;
mod conformance_etcd;
mod conformance_model;
mod embedded_recovery;
mod etcd_compaction;
mod etcd_tls;
mod model_based;
