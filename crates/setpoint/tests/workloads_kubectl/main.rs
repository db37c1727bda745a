//! The workload loops of issue 17 end to end: a `setpoint server` process (all loops, the local
//! node agent running pods as real processes) driven by the real `kubectl`.

#[path = "../common/mod.rs"]
mod common;

mod jobs;
