//! What this crate's kubectl tests share beyond the test kit (`setpoint-testenv`, whose
//! `process` module starts the `setpoint server` processes they drive): the CPU-burning
//! Deployment of the autoscaler tests ([`burn`]) and the local processes a test's pods run as
//! ([`processes`]).

#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)] // shared test support; failures should panic

pub mod burn;
pub mod processes;

#[allow(unused_imports)] // each test module uses part of it
pub use setpoint_testenv::kubectl::{kubectl_command, kubectl_version};
pub use setpoint_testenv::process::{free_loopback_addr, Server};
