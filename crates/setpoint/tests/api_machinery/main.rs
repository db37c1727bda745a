//! The API machinery operators rely on, driven by the real `kubectl` against a Setpoint
//! server: server-side apply and field management (`apply`), `/metrics` (`metrics`).

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic

#[path = "../common/mod.rs"]
mod common;

mod apply;
mod metrics;
