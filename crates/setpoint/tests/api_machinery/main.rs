//! Issue 16's API machinery against `setpoint server` processes driven by the real `kubectl`:
//! one module per topic.

#[path = "../common/mod.rs"]
mod common;

mod admission;
