//! The sample operator (Kubernetes' sample-controller on Setpoint's SDK) as its own process:
//! a `Foo` custom resource owns a Deployment; see `docs/guide/operator.md`.
//!
//! ```sh
//! cargo run -p setpoint --example sample-operator -- --print-crd      # the CRD, as YAML
//! cargo run -p setpoint --example sample-operator -- \
//!     --kubeconfig ./data/admin.kubeconfig --state-dir ./foo-state
//! ```
//!
//! It installs the CRD (and waits until it is established) unless `--no-install-crd`, then
//! reconciles Foos until SIGINT or SIGTERM.

mod foo;
mod operator;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kube::CustomResourceExt;
use setpoint_runtime::{install_crd, Client};

/// Flags.
#[derive(Parser, Debug)]
#[command(
    name = "sample-operator",
    about = "Foos own Deployments: Setpoint's sample-controller"
)]
struct Args {
    /// Print the Foo CustomResourceDefinition as YAML and exit.
    #[arg(long)]
    print_crd: bool,
    /// The kubeconfig to connect with (default: KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Where the per-Foo state files go (removed by the finalizer when a Foo is deleted).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Do not install the CRD; expect it to be there.
    #[arg(long)]
    no_install_crd: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.print_crd {
        print!("{}", serde_yaml_ng::to_string(&foo::Foo::crd())?);
        return Ok(());
    }
    let state_dir = args
        .state_dir
        .clone()
        .context("--state-dir is required (or --print-crd)")?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let client = match &args.kubeconfig {
            Some(path) => Client::from_kubeconfig(path).await?,
            None => Client::infer().await?,
        };
        if !args.no_install_crd {
            install_crd(&client, &foo::Foo::crd(), Duration::from_secs(60)).await?;
            tracing::info!("CRD foos.samplecontroller.setpoint.dev established");
        }
        operator::run(client, state_dir, shutdown()).await?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stop with SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
