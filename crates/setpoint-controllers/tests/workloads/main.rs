//! The workload loops of issue 17 against a real in-process API server, one module per loop.
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

#[path = "../common/mod.rs"]
mod common;

mod quota;
mod replication;
