//! The workload kinds of issue 17 end to end: `setpoint server` (all loops and the local
//! agent, real processes) driven by the real `kubectl`; one module per scenario family.

#[path = "../common/mod.rs"]
mod common;

mod volumes;
