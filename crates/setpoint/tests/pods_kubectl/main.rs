//! Issue 18's pod features driven by the real `kubectl` (and raw sockets) against
//! `setpoint server` processes with real process pods on the local agent: Services through
//! the agent's proxy, the cluster DNS resolver.

#[path = "../common/mod.rs"]
mod common;

mod services;
