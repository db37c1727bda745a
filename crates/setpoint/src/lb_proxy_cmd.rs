//! `setpoint lb-proxy --config FILE`: one load balancer process, as the `service-lb` loop
//! starts it for each LoadBalancer Service (`setpoint_providers::lb::proxy`). Runs until
//! SIGTERM or SIGINT.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tokio::signal::unix::{signal, SignalKind};

/// Flags of `setpoint lb-proxy`.
#[derive(Debug, Args)]
pub(crate) struct LbProxyArgs {
    /// The balancer's configuration file (JSON: address, algorithm, health checks, ports and
    /// their backends); its state is written beside it (`FILE.state`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,
}

/// Runs the balancer until SIGTERM or SIGINT.
pub(crate) async fn lb_proxy(args: LbProxyArgs) -> Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let stop = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    setpoint_providers::lb::proxy::run(&args.config, stop).await?;
    Ok(())
}
