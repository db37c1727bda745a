//! What the loops' integration tests share: running some of the built-in loops against a test
//! server, until the test stops them.

#![allow(dead_code, unreachable_pub)] // each test module uses part of it

use setpoint_controllers::{LoopContext, LoopError, LoopSelection};
use setpoint_runtime::Client;
use setpoint_testenv::Running;

/// Runs the loops `selection` names (`"deployment,replicaset"`) on `client`.
pub fn run_loops(client: &Client, selection: &str) -> Running<LoopError> {
    run_loops_with(LoopContext::new(client.clone()), selection)
}

/// Runs the loops `selection` names with `ctx` (its settings, say).
pub fn run_loops_with(ctx: LoopContext, selection: &str) -> Running<LoopError> {
    let selection: LoopSelection = selection.parse().expect("known loops");
    Running::spawn(move |shutdown| async move {
        setpoint_controllers::run(ctx, &selection, shutdown).await
    })
}
