//! `setpoint agent`: the node agent alone, against an API server named by a kubeconfig; and
//! the local agent that `setpoint server` runs for its own machine.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use setpoint_agent::AgentConfig;
use setpoint_runtime::Client;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Flags of `setpoint agent`.
#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// The kubeconfig that reaches the API server.
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: PathBuf,
    /// The Node's name.
    #[arg(long, value_name = "NAME")]
    pub(crate) node_name: String,
    /// Where pods' working directories and logs live.
    #[arg(long, value_name = "DIR")]
    pub(crate) root_dir: PathBuf,
}

/// Flags of `setpoint server` about its local agent.
#[derive(Debug, Args)]
pub(crate) struct LocalAgentArgs {
    /// Do not run a node agent for this machine (pods then run only on other agents' or
    /// simulated nodes).
    #[arg(long)]
    pub(crate) no_agent: bool,
}

/// Runs `setpoint agent` until SIGINT or SIGTERM.
pub(crate) async fn agent(args: AgentArgs) -> Result<()> {
    let client = Client::from_kubeconfig(&args.kubeconfig)
        .await
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let shutdown = CancellationToken::new();
    let config = AgentConfig {
        node_name: args.node_name,
        root_dir: args.root_dir,
    };
    let agent = tokio::spawn(setpoint_agent::run(client, config, shutdown.clone()));
    crate::server::wait_for_signal().await?;
    shutdown.cancel();
    agent.await.context("the agent task failed")??;
    Ok(())
}

/// Starts the local agent of `setpoint server`, unless switched off.
pub(crate) fn start_local(
    args: &LocalAgentArgs,
    client: Client,
    data_dir: &Path,
    shutdown: CancellationToken,
) -> Option<JoinHandle<Result<()>>> {
    if args.no_agent {
        return None;
    }
    let config = AgentConfig {
        node_name: "local".to_owned(),
        root_dir: data_dir.join("agent"),
    };
    Some(tokio::spawn(async move {
        setpoint_agent::run(client, config, shutdown)
            .await
            .context("the local node agent")
    }))
}
