//! What a Sync reads before it applies: its source's artifact (contracts.md: no artifact, or a
//! source whose `Ready` is `False`, is `ArtifactFailed`) and the state of the Syncs it depends
//! on (each `Ready=True` at its own source's current revision).

use setpoint_runtime::{ObjectCache, ObjectKey};

use crate::kinds::{condition, Artifact, GitRepository, Sync};

/// Why the source cannot be used (the `ArtifactFailed` message).
pub(crate) fn artifact(
    sync: &Sync,
    repositories: &ObjectCache<GitRepository>,
) -> Result<Artifact, String> {
    let reference = &sync.spec.source_ref;
    let namespace = sync.source_namespace();
    let name = format!("{}/{namespace}/{}", reference.kind, reference.name);
    if reference.kind != "GitRepository" {
        return Err(format!(
            "source {name}: only GitRepository sources are supported"
        ));
    }
    let Some(repository) = repositories.get(&ObjectKey::namespaced(&namespace, &reference.name))
    else {
        return Err(format!("source {name} not found"));
    };
    let status = repository.status.as_ref();
    if let Some(ready) = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::READY))
        .filter(|c| c.status == "False")
    {
        return Err(format!("source {name} is not ready: {}", ready.message));
    }
    status
        .and_then(|s| s.artifact.clone())
        .ok_or_else(|| format!("source {name} has no artifact yet"))
}

/// The current revision of a Sync's source, if it has an artifact.
fn source_revision(sync: &Sync, repositories: &ObjectCache<GitRepository>) -> Option<String> {
    let reference = &sync.spec.source_ref;
    let namespace = sync.source_namespace();
    repositories
        .get(&ObjectKey::namespaced(namespace, &reference.name))?
        .status
        .as_ref()?
        .artifact
        .as_ref()
        .map(|a| a.revision.clone())
}

/// Why a dependency of `sync` is not ready (the `DependencyNotReady` message).
pub(crate) fn dependencies(
    sync: &Sync,
    syncs: &ObjectCache<Sync>,
    repositories: &ObjectCache<GitRepository>,
) -> Result<(), String> {
    for dependency in &sync.spec.depends_on {
        let namespace = dependency
            .namespace
            .clone()
            .or_else(|| sync.metadata.namespace.clone())
            .unwrap_or_default();
        let name = format!("{namespace}/{}", dependency.name);
        let Some(other) = syncs.get(&ObjectKey::namespaced(&namespace, &dependency.name)) else {
            return Err(format!("dependency '{name}' not found"));
        };
        let status = other.status.as_ref();
        let ready = status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == condition::READY && c.status == "True")
                && s.observed_generation == other.metadata.generation
        });
        if !ready {
            return Err(format!("dependency '{name}' is not ready"));
        }
        let applied = status.and_then(|s| s.last_applied_revision.clone());
        if applied.is_none() || applied != source_revision(&other, repositories) {
            return Err(format!(
                "dependency '{name}' has not applied its source's current revision"
            ));
        }
    }
    Ok(())
}
