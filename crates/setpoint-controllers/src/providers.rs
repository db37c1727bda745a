//! The providers of `setpoint-providers` (pattern 3) run as built-in loops: the context they
//! get from the loops' one — the loop's own client, the shared informers and metrics, the
//! clock, and `LoopSettings::providers` (whose directory is `<data dir>/providers` in
//! `setpoint server`; unset, one under the system's temporary directory).

use setpoint_providers::ProviderContext;

use crate::LoopContext;

/// The context a provider's loops run with.
pub(crate) fn context(ctx: &LoopContext) -> ProviderContext {
    let mut settings = ctx.settings.providers.clone();
    if settings.dir.is_none() {
        settings.dir =
            Some(std::env::temp_dir().join(format!("setpoint-providers-{}", std::process::id())));
    }
    ProviderContext {
        client: ctx.client.clone(),
        factory: ctx.factory.clone(),
        metrics: ctx.metrics.clone(),
        clock: ctx.clock.clone(),
        settings,
    }
}
