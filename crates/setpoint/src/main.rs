//! The `setpoint` command: wires the store, the API server, the control loops and the node
//! agent together.
//!
//! Each subcommand lives in its own module: [`mod@cli`] parses, [`mod@bench`] measures,
//! [`mod@server`] runs the control plane (its roles and leader election in [`mod@roles`]), [`mod@agent`] a node agent, [`mod@simulated`]
//! simulated nodes, [`mod@simulation`] the control-law simulations, [`mod@debug`] holds hidden
//! tools for Setpoint's own tests.

mod agent;
mod audit_args;
mod authn_args;
mod bench;
mod cli;
mod console_url;
mod debug;
mod encryption;
mod gitops_cmd;
mod identities;
mod kubeconfig_cmd;
mod kubernetes_service;
mod lb_proxy_cmd;
mod limits;
mod metrics;
mod migrate;
mod panic_report;
mod roles;
mod server;
mod simulated;
mod simulation;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command};

/// mimalloc rather than the system allocator: the API server, the loops and the informers
/// allocate and free many short-lived JSON trees, and glibc's malloc spent about 40 % of the
/// server's CPU on them (consolidating and unlinking chunks) in `bench workloads`. Built without
/// transparent huge pages (the workspace's `no_thp`): see the root `Cargo.toml`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs the command. An error (a bad flag value, an unreachable etcd, a data directory that
/// cannot be used) is printed as one line, its causes joined with `: `, and the exit status is
/// 1: never a backtrace, even under `RUST_BACKTRACE=1` (anyhow's `Debug` form, which
/// `fn main() -> Result` would print, appends one); backtraces are for panics.
fn main() -> ExitCode {
    panic_report::install();
    match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("setpoint: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode> {
    let cli = Cli::parse();
    // The container shim is a small synchronous supervisor: no runtime, no logging set-up.
    if let Command::AgentShim { args } = cli.command {
        return Ok(setpoint_agent::shim_main(args));
    }
    // Cleaning up after an agent is synchronous: no runtime, no logging set-up.
    if let Command::Agent(agent::AgentCli {
        command: Some(agent::AgentCommand::Cleanup(args)),
        ..
    }) = &cli.command
    {
        agent::cleanup(args)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Kubeconfigs are made from files: no runtime, no logging set-up.
    if let Command::Kubeconfig(command) = cli.command {
        kubeconfig_cmd::kubeconfig(command)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Simulations are pure computation: no runtime, no logging set-up.
    if let Command::Simulate(command) = cli.command {
        simulation::simulate(command)?;
        return Ok(ExitCode::SUCCESS);
    }
    let default_level = match cli.command {
        Command::Server(_) | Command::Agent(_) | Command::LbProxy(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let done = match cli.command {
            Command::Server(args) => server::server(*args).await,
            Command::Agent(args) => agent::agent(args).await,
            Command::Migrate(args) => migrate::migrate(args).await,
            Command::Encryption(command) => encryption::encryption(command).await,
            Command::Bench(command) => bench::bench(command).await,
            Command::Debug(command) => debug::debug(command).await,
            // `gitops diff` exits 1 on differences, as `kubectl diff`.
            Command::Gitops(command) => return gitops_cmd::gitops(command).await,
            Command::LbProxy(args) => lb_proxy_cmd::lb_proxy(args).await,
            Command::ConsoleUrl(args) => console_url::console_url(args).await,
            Command::AgentShim { .. } | Command::Simulate(_) | Command::Kubeconfig(_) => Ok(()),
        };
        done.map(|()| ExitCode::SUCCESS)
    })
}
