//! The workload loops of issue 17 driven by the real `kubectl` against a `setpoint server`
//! process (all loops on, real process pods), one module per topic.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic

#[path = "../common/mod.rs"]
mod common;

mod quota;
