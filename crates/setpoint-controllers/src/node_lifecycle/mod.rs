//! The node lifecycle loop (kube-controller-manager's `node-lifecycle-controller`): marks silent nodes `Ready=Unknown`, taints them, and evicts their pods.

use setpoint_runtime::ControllerError;
use tokio_util::sync::CancellationToken;

use crate::LoopContext;

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let _ = ctx;
    shutdown.cancelled().await;
    Ok(())
}
