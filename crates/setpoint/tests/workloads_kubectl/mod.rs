//! The workload loops of issue 17 driven by the real `kubectl` against `setpoint server`
//! processes (all loops on; real process pods on the local agent, simulated nodes where a
//! test asks for them).

mod daemonsets;
mod drain;
mod jobs;
mod quota;
mod services;
mod statefulsets;
mod volumes;
