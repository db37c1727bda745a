//! The `cluster-api` loop. For now it only installs the five CRDs and then waits for shutdown:
//! the Cluster, Machine, MachineSet, MachineDeployment and MachineHealthCheck controllers will
//! run here, one module each, on the types of `api/` (docs/cluster-api.md says what is done).

use std::time::Duration;

use setpoint_runtime::ControllerError;
use tokio_util::sync::CancellationToken;

use crate::CapiContext;

/// The loop's name (controller, metrics, Events' reporter).
pub const NAME: &str = "cluster-api";
/// How long installing each CRD may take.
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// Installs the Cluster API CRDs, then waits until `shutdown` is cancelled (no controller runs
/// yet). If the CRDs cannot be installed the loop logs why and waits for `shutdown` (the other
/// loops of the process keep running). Cancel-safe: cancelling `shutdown` ends it.
pub async fn run(ctx: CapiContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    tokio::select! {
        result = crate::install_crds(&ctx.client, CRD_TIMEOUT) => match result {
            Ok(()) => tracing::info!("Cluster API CRDs installed (cluster.x-k8s.io/v1beta2)"),
            Err(e) => tracing::error!(error = %e, "installing the Cluster API CRDs; the cluster-api loop does not run"),
        },
        () = shutdown.cancelled() => return Ok(()),
    }
    shutdown.cancelled().await;
    Ok(())
}
