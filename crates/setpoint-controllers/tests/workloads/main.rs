//! The workload loops of issue 17 against a real in-process API server (only the loops a test
//! names run): one module per loop family.
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

#[path = "../common/mod.rs"]
mod common;

mod volumes;
