//! The `setpoint` command: wires the store, the API server and the control loops together.
//!
//! Each subcommand lives in its own module: [`mod@cli`] parses, [`mod@bench`] measures,
//! [`mod@debug`] holds hidden tools for Setpoint's own tests.

mod bench;
mod cli;
mod debug;

use anyhow::Result;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command};

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Bench(command) => bench::bench(command).await,
        Command::Debug(command) => debug::debug(command).await,
    }
}
