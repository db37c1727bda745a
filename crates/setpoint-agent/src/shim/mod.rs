//! The container shim: a small supervisor process, started by the agent for each container
//! run, that owns the container's process, writes its log and records its exit, and outlives
//! an agent restart.

use std::ffi::OsString;
use std::process::ExitCode;

/// Runs the shim with its command-line arguments (after the program and subcommand names).
pub fn shim_main(args: Vec<OsString>) -> ExitCode {
    let _ = args;
    ExitCode::FAILURE
}
