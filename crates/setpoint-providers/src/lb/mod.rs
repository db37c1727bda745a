//! CONTRACT SKELETON (providers-base): the helper `lb` writes this provider.

use setpoint_runtime::ControllerError;
use tokio_util::sync::CancellationToken;

use crate::ProviderContext;

/// Runs this provider's loops until `shutdown` is cancelled.
pub async fn run(ctx: ProviderContext, shutdown: CancellationToken) -> Result<(), ControllerError> {
    let _ = ctx;
    shutdown.cancelled().await;
    Ok(())
}
