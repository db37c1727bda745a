//! Pods of issue 18 driven by the real `kubectl` against a `setpoint server` process with
//! real process pods on the local agent: resource limits, streams, networking.

#[path = "../common/mod.rs"]
mod common;

mod limits;
