//! This crate's integration tests, as one binary: a build links it once, not once per file.
//! Each module covers one area; `cargo test -p setpoint-runtime --test integration MODULE::` runs one.

mod fixtures;
mod gated;

mod controller;
mod custom_resource;
mod event_recorder;
mod failover;
mod finalizer;
mod informer;
mod leader_election;
mod managed;
mod metrics_endpoint;
mod queue_semantics;
mod status_update;
mod watcher;
