//! This crate's integration tests, as one binary: a build links it once, not once per file.
//! Each module covers one area; `cargo test -p setpoint-apiserver --test integration MODULE::` runs one.

mod common;

mod api_errors;
mod authentication;
mod kubectl;
mod lifecycle;
mod pod_log;
mod request_limits;
mod security;
mod streaming;
mod tls_versions;
