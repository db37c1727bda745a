//! Pattern 1 of Setpoint's reconciliation patterns, git → API: the desired state lives in a
//! git repository, the actual state is the API server's objects, and two loops keep them equal.
//!
//! - `GitRepository` (`source/`): follows a branch, tag, semver range or commit of a
//!   repository, and exports the files of the commit it resolves to as an artifact
//!   (`artifact.rs`), reporting `status.artifact.revision` (`<branch>@sha1:<sha>`).
//! - `Sync` (`sync/`): applies one path of a source's artifact with server-side apply, keeps an
//!   inventory of what it applied, prunes what left git, checks health, and corrects drift at
//!   once when a managed object changes (it watches them), besides every `interval`.
//!
//! Both are custom resources of `gitops.setpoint.dev/v1` (`kinds.rs`), written with the SDK like
//! the built-in loops: `setpoint server` runs them in-process, and they run unchanged against
//! any Kubernetes API server.

pub mod artifact;
mod context;
pub mod duration;
pub mod kinds;
pub mod manifests;
pub mod source;
pub mod sync;

pub use artifact::ArtifactStore;
pub use context::GitopsContext;
pub use kinds::{GitRepository, Sync};

/// An error and its sources, `: `-joined into one line for a condition message (a source whose
/// text the line already holds is not repeated).
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = e.source();
    }
    message
}
