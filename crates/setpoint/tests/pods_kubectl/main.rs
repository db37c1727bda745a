//! Pods end to end with real processes (issue 18): `kubectl` against `setpoint server`
//! processes whose local agent runs the pods — networking, streams, limits. Each helper's
//! checks live in a module of their own.

#[path = "../common/mod.rs"]
mod common;

mod networking;
mod services;
