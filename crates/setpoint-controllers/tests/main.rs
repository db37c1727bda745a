//! This crate's integration tests, as one binary: a build links it once, not once per file.
//! Each module covers one area; `cargo test -p setpoint-controllers --test integration MODULE::` runs one.

mod common;

mod deployment;
mod garbage_collector;
mod namespace;
mod node_lifecycle;
mod replicaset;
mod scheduler;
mod workloads;
