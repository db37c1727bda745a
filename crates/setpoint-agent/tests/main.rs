//! This crate's integration tests, as one binary: a build links it once, not once per file.
//! Each module covers one area; `cargo test -p setpoint-agent --test integration MODULE::` runs one.

mod common;

mod agent;
mod logs;
mod metrics;
mod probes;
mod simulated;
