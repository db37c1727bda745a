//! The container shim as a program of its own, for the agent crate's tests (the `setpoint`
//! binary runs the same code as `setpoint agent-shim`).

fn main() -> std::process::ExitCode {
    setpoint_agent::shim_main(std::env::args_os().skip(1).collect())
}
