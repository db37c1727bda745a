//! Issue 17's workload loops driven by the real `kubectl` against a `setpoint server` process
//! (simulated nodes or real process pods), one module per scenario.

#[path = "../common/mod.rs"]
mod common;

mod drain;
