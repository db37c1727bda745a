//! Cluster API (`setpoint-capi`) runs as a built-in loop, `cluster-api`: the context it gets
//! from the loops' one.

use setpoint_capi::CapiContext;

use crate::LoopContext;

/// The context the Cluster API loop runs with: the loop's own client, the shared informers and
/// metrics, and the clock.
pub(crate) fn context(ctx: &LoopContext) -> CapiContext {
    CapiContext {
        client: ctx.client.clone(),
        factory: ctx.factory.clone(),
        metrics: ctx.metrics.clone(),
        clock: ctx.clock.clone(),
    }
}
