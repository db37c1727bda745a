//! The GitOps loops of `setpoint-gitops` run as built-in loops: the context they get from the
//! loops' one, and the directory they share (the source loop writes artifacts there, the sync
//! loop reads them). It is `LoopSettings::gitops_dir` (`<data dir>/gitops` in `setpoint
//! server`), made private (0700) before any loop starts; unset, one fresh directory under the
//! system's temporary directory, chosen once for every loop of the process.

use std::path::Path;

use setpoint_gitops::{ArtifactStore, GitopsContext};

use crate::{Loop, LoopContext, LoopSelection};

impl Loop {
    /// Whether this is one of the GitOps loops (which share the artifact directory).
    pub(crate) fn is_gitops(self) -> bool {
        matches!(self, Loop::GitopsSource | Loop::GitopsSync)
    }
}

/// `ctx` with its GitOps directory chosen and made, when a GitOps loop is selected.
pub(crate) fn with_artifact_dir(mut ctx: LoopContext, selection: &LoopSelection) -> LoopContext {
    if !selection.loops().iter().any(|l| l.is_gitops()) {
        return ctx;
    }
    let dir = match &ctx.settings.gitops_dir {
        Some(dir) => dir.clone(),
        None => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let dir = std::env::temp_dir()
                .join(format!("setpoint-gitops-{}-{stamp}", std::process::id()));
            tracing::info!(dir = %dir.display(), "no GitOps directory configured: the GitOps loops keep their mirrors and artifacts in a temporary directory");
            dir
        }
    };
    if let Err(e) = private_dir(&dir) {
        tracing::error!(dir = %dir.display(), error = %e, "making the GitOps directory; fetches will fail until it can be written");
    }
    ctx.settings.gitops_dir = Some(dir);
    ctx
}

/// Creates `dir` (and its parents) and makes it 0700.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The context a GitOps loop runs with: the loop's own client (its identity), the shared
/// informers and metrics, and the artifact store in the GitOps directory.
pub(crate) fn context(ctx: &LoopContext) -> GitopsContext {
    let dir = ctx
        .settings
        .gitops_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("setpoint-gitops"));
    GitopsContext {
        client: ctx.client.clone(),
        factory: ctx.factory.clone(),
        metrics: ctx.metrics.clone(),
        artifacts: ArtifactStore::new(dir),
    }
}
