//! The ConfigMap mirror controller as its own process, against any Kubernetes API server — a
//! `setpoint server` or a real cluster — through a kubeconfig. The reconciler is the very one the
//! in-process `configmap_mirror` example runs.
//!
//! ```sh
//! setpoint server --data-dir /tmp/sp &
//! cargo run -p setpoint-runtime --example configmap_mirror_remote -- \
//!     --kubeconfig /tmp/sp/admin.kubeconfig --metrics-addr 127.0.0.1:9090 --leader-elect
//! kubectl --kubeconfig /tmp/sp/admin.kubeconfig create configmap settings --from-literal=color=blue
//! kubectl --kubeconfig /tmp/sp/admin.kubeconfig label configmap settings mirror.setpoint.dev/enabled=true
//! kubectl --kubeconfig /tmp/sp/admin.kubeconfig get configmap settings-mirror -o yaml
//! curl -s 127.0.0.1:9090/metrics | grep configmap-mirror
//! ```
//!
//! Flags: `--kubeconfig PATH` (default: `KUBECONFIG`, `~/.kube/config`, in-cluster),
//! `--metrics-addr ADDR` (serve Prometheus metrics on `http://ADDR/metrics`), `--leader-elect`
//! (run only while holding the Lease `kube-system/configmap-mirror`, so several copies can run
//! and exactly one acts), `--resync SECONDS` (re-reconcile every source periodically).
//! Stops gracefully on Ctrl-C or SIGTERM, letting reconciles in flight finish.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use setpoint_runtime::{
    Client, InformerFactory, LeaderElection, LeaderElectionConfig, LeaseLock, Metrics,
};
use tokio::signal::unix::{signal, SignalKind};

mod mirror;

/// Command-line flags.
#[derive(Debug, Parser)]
struct Args {
    /// The kubeconfig to use (default: KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Serve Prometheus metrics on http://ADDR/metrics.
    #[arg(long)]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Act only while holding the Lease kube-system/configmap-mirror.
    #[arg(long)]
    leader_elect: bool,
    /// Re-reconcile every source this often (seconds), repairing drift no event reports.
    #[arg(long)]
    resync: Option<u64>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let client = match &args.kubeconfig {
        Some(path) => Client::from_kubeconfig(path).await?,
        None => Client::infer().await?,
    };

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut term = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("stopping: letting reconciles in flight finish");
        let _ = stop_tx.send(true);
    });

    let metrics = Metrics::new();
    if let Some(addr) = args.metrics_addr {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        tracing::info!(%addr, "serving metrics on http://{addr}/metrics");
        let mut stop = stop_rx.clone();
        tokio::spawn(metrics.clone().serve(listener, async move {
            let _ = stop.wait_for(|s| *s).await;
        }));
    }

    let run_controller = {
        let metrics = metrics.clone();
        let resync = args.resync;
        move |lost: Option<setpoint_runtime::LeadershipToken>,
              mut stop: tokio::sync::watch::Receiver<bool>| async move {
            let factory = InformerFactory::new(client.clone());
            let configmaps = factory.informer::<ConfigMap>().store();
            let mut controller = mirror::controller(&factory);
            if let Some(secs) = resync {
                controller = controller.resync(Duration::from_secs(secs));
            }
            let handle = controller.handle();
            metrics.add_controller(&handle.name(), {
                let handle = handle.clone();
                move || handle.metrics()
            });
            metrics.add_queue(&handle.name(), move || handle.queue_metrics());
            metrics.add_informers({
                let factory = factory.clone();
                move || factory.metrics()
            });
            let ctx = Arc::new(mirror::Mirror { client, configmaps });
            let result = controller
                .run(mirror::reconcile, ctx, async move {
                    match lost {
                        Some(token) => tokio::select! {
                            _ = token.lost() => tracing::warn!("lost the lease: stopping"),
                            _ = stop.wait_for(|s| *s) => {}
                        },
                        None => {
                            let _ = stop.wait_for(|s| *s).await;
                        }
                    }
                })
                .await;
            factory.shut_down();
            result
        }
    };

    if args.leader_elect {
        let election = LeaderElection::new(
            client_for_lease(&args).await?,
            LeaseLock::new("kube-system", "configmap-mirror"),
            LeaderElectionConfig::default(),
        )?;
        metrics.add_leader_election("configmap-mirror", {
            let election = election.clone();
            move || election.is_leader()
        });
        {
            let election = election.clone();
            let mut stop = stop_rx.clone();
            tokio::spawn(async move {
                let _ = stop.wait_for(|s| *s).await;
                election.stop();
            });
        }
        tracing::info!(identity = election.identity(), "campaigning for the lease");
        let stop = stop_rx.clone();
        match election
            .run(|token| run_controller(Some(token), stop))
            .await?
        {
            setpoint_runtime::ElectionEnd::Finished(result) => result?,
            setpoint_runtime::ElectionEnd::Lost(_) => {
                // The process stops: a fresh start campaigns again with empty caches.
                return Err("leadership lost".into());
            }
            setpoint_runtime::ElectionEnd::NeverLed => {}
        }
    } else {
        run_controller(None, stop_rx.clone()).await?;
    }
    Ok(())
}

async fn client_for_lease(args: &Args) -> Result<Client, setpoint_runtime::ClientError> {
    match &args.kubeconfig {
        Some(path) => Client::from_kubeconfig(path).await,
        None => Client::infer().await,
    }
}
