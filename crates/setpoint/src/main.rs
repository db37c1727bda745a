//! The `setpoint` command: wires the store, the API server and the control loops together.

use anyhow::Result;
use clap::Parser;

#[derive(Parser)]
#[command(name = "setpoint", version, about = "A Kubernetes-compatible reconciliation control plane")]
struct Cli {}

fn main() -> Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
