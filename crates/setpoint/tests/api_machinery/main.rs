//! Issue 16's API machinery against `setpoint server` processes driven by the real `kubectl`:
//! one module per topic.

#![allow(clippy::unwrap_used)] // tests and their helpers: a failure should panic

#[path = "../common/mod.rs"]
mod common;

mod admission;
