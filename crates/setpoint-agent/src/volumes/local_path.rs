//! The node's side of local-path volumes (StorageClass provisioner `setpoint.dev/local-path`):
//! the agent publishes where their directories go on this node — `<root>/local-path`, in the
//! Node annotation `setpoint.dev/local-path-root` — creates a volume's directory on its first
//! mount (`host.rs`), and deletes it when the volume object is deleted (its claim gone,
//! reclaim policy `Delete`): the volume carries the finalizer
//! `setpoint.dev/local-path-cleanup`, which the agent of the node named by its
//! `setpoint.dev/local-path` annotation removes only after the directory is gone and no pod
//! of this node that names the volume's claim is still there. A directory outside this
//! agent's local-path root is never deleted (the finalizer is still removed, with a warning).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use kube::api::{Patch, PatchParams};
use setpoint_runtime::{
    remove_finalizer, Action, Client, Controller, ControllerError, FinalizerError, InformerFactory,
    ObjectCache,
};
use tokio_util::sync::CancellationToken;

use super::host::LOCAL_PATH_ANNOTATION;

/// The Node annotation naming this node's local-path root.
pub(crate) const LOCAL_PATH_ROOT: &str = "setpoint.dev/local-path-root";
/// The finalizer this agent removes once a volume's directory is deleted.
pub(crate) const LOCAL_PATH_CLEANUP: &str = "setpoint.dev/local-path-cleanup";

/// The local-path root under the agent's root directory.
pub(crate) fn root_of(agent_root: &Path) -> PathBuf {
    agent_root.join("local-path")
}

/// Sets the Node's `setpoint.dev/local-path-root` annotation, retrying until the Node exists
/// and the write succeeds (or `shutdown`).
pub(crate) async fn publish_root(
    client: Client,
    node: String,
    root: PathBuf,
    shutdown: CancellationToken,
) {
    let patch = Patch::Merge(serde_json::json!({
        "metadata": {"annotations": {LOCAL_PATH_ROOT: root.display().to_string()}}
    }));
    loop {
        match client
            .api::<Node>()
            .patch(&node, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(error = %e, "publishing the node's local-path root; retrying")
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

struct Cleanup {
    client: Client,
    node: String,
    root: PathBuf,
    pods: ObjectCache<Pod>,
}

/// Runs the cleanup of this node's released local-path volumes until `shutdown`.
pub(crate) async fn run_cleanup(
    factory: &InformerFactory,
    client: Client,
    node: String,
    root: PathBuf,
    pods: ObjectCache<Pod>,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let cleanup = Arc::new(Cleanup {
        client,
        node,
        root,
        pods,
    });
    Controller::<PersistentVolume>::new(factory)
        .named("local-path-cleanup")
        .run(reconcile, cleanup, shutdown.cancelled_owned())
        .await
}

async fn reconcile(
    volume: Arc<PersistentVolume>,
    c: Arc<Cleanup>,
) -> Result<Action, FinalizerError> {
    let ours = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LOCAL_PATH_ANNOTATION))
        .is_some_and(|n| *n == c.node);
    let pending = volume
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == LOCAL_PATH_CLEANUP));
    if !ours || !pending || volume.metadata.deletion_timestamp.is_none() {
        return Ok(Action::await_change());
    }
    let name = volume.metadata.name.clone().unwrap_or_default();
    let spec = volume.spec.clone().unwrap_or_default();
    if let Some(claim) = &spec.claim_ref {
        let in_use = c.pods.list().iter().any(|pod| {
            pod.metadata.namespace == claim.namespace
                && pod
                    .spec
                    .iter()
                    .flat_map(|s| s.volumes.iter().flatten())
                    .filter_map(|v| v.persistent_volume_claim.as_ref())
                    .any(|v| Some(&v.claim_name) == claim.name.as_ref())
        });
        if in_use {
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
    }
    let path = spec
        .local
        .map(|l| PathBuf::from(l.path))
        .or_else(|| spec.host_path.map(|h| PathBuf::from(h.path)));
    if let Some(path) = path {
        let inside = path.starts_with(&c.root)
            && path
                .components()
                .all(|p| !matches!(p, std::path::Component::ParentDir))
            && path != c.root;
        if inside {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(volume = %name, path = %path.display(), "deleted a released local-path volume's directory")
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(volume = %name, path = %path.display(), error = %e, "deleting a local-path volume's directory");
                    return Ok(Action::requeue(Duration::from_secs(5)));
                }
            }
        } else {
            tracing::warn!(volume = %name, path = %path.display(), root = %c.root.display(), "not deleting a volume directory outside the agent's local-path root");
        }
    }
    remove_finalizer(
        &c.client.api::<PersistentVolume>(),
        &name,
        LOCAL_PATH_CLEANUP,
    )
    .await?;
    Ok(Action::await_change())
}
