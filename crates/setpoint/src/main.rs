//! The `setpoint` command: wires the store, the API server and the control loops together.
//!
//! Each subcommand lives in its own module: [`mod@cli`] parses, [`mod@bench`] measures,
//! [`mod@server`] runs the control plane, [`mod@debug`] holds hidden tools for Setpoint's own
//! tests.

mod agent;
mod bench;
mod cli;
mod debug;
mod server;
mod simulated;

use anyhow::Result;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command};

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Server(_) | Command::Agent(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Server(args) => server::server(args).await,
        Command::Agent(args) => agent::agent(args).await,
        Command::Bench(command) => bench::bench(command).await,
        Command::Debug(command) => debug::debug(command).await,
    }
}
