//! Pods end to end with real processes (issue 18): `kubectl` against `setpoint server`
//! processes whose local agent runs the pods — networking, streams, limits, one module each.

#[path = "../common/mod.rs"]
mod common;

mod limits;
mod networking;
mod services;
