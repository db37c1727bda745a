//! (being written)

use setpoint_runtime::ControllerError;
use tokio_util::sync::CancellationToken;

use crate::LoopContext;

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let _ = (ctx, shutdown);
    Ok(())
}
