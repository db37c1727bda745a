//! The scheduler: binds each unscheduled pod to a node through `pods/binding`.

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
