//! The artifact store: a directory holding, for each GitRepository, the files of the commits
//! it resolved to, so Syncs in the same process read them without fetching anything.
//!
//! Layout: `<root>/gitrepository/<namespace>/<name>/<sha>/` holds the exported tree of one
//! commit (ignored paths left out); a GitRepository's `status.artifact.path` names that
//! directory relative to the root. An artifact directory is complete once it exists: the
//! source loop writes it under a temporary name and renames it into place. The source loop
//! keeps the last few artifacts of each repository and deletes older ones, so a Sync reading an
//! artifact that was current a moment ago still finds it.
//!
//! In `setpoint server` the root is `<data dir>/gitops`; run against another cluster, it is
//! whatever directory the process is given: the source and sync loops run together, as Flux's
//! source- and kustomize-controllers share an artifact server.

use std::path::{Component, Path, PathBuf};

/// Artifacts kept per GitRepository (the current one and those just before it).
pub const KEEP: usize = 3;

/// Errors naming an artifact.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The path is absolute or climbs out of the root.
    #[error("artifact path {0:?} is not a relative path inside the artifact store")]
    OutsideRoot(String),
    /// No artifact directory at that path (deleted, or never made here).
    #[error("artifact {0:?} is not in the artifact store (made by another process, or deleted)")]
    Missing(String),
}

/// The root of the artifact directories.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: PathBuf,
}

impl ArtifactStore {
    /// A store under `root` (created when the first artifact is written).
    pub fn new(root: impl Into<PathBuf>) -> ArtifactStore {
        ArtifactStore { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The relative path (as `status.artifact.path` holds it) of a GitRepository's commit.
    pub fn relative_path(namespace: &str, name: &str, sha: &str) -> String {
        format!("gitrepository/{namespace}/{name}/{sha}")
    }

    /// The directory of every artifact of one GitRepository.
    pub fn repository_dir(&self, namespace: &str, name: &str) -> PathBuf {
        self.root.join("gitrepository").join(namespace).join(name)
    }

    /// The directory an artifact's `path` names, checked to stay inside the root and to exist.
    pub fn dir(&self, path: &str) -> Result<PathBuf, ArtifactError> {
        let relative = Path::new(path);
        // `components()` drops inner `.` segments, so the segments are checked as written too.
        if path.is_empty()
            || path
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..")
            || !relative
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(ArtifactError::OutsideRoot(path.to_owned()));
        }
        let dir = self.root.join(relative);
        if dir.is_dir() {
            Ok(dir)
        } else {
            Err(ArtifactError::Missing(path.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_outside_the_root_should_be_refused() {
        let store = ArtifactStore::new("/nonexistent-root");
        for bad in ["", "/etc", "../x", "gitrepository/../../etc", "a/./b"] {
            assert!(
                matches!(store.dir(bad), Err(ArtifactError::OutsideRoot(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            store.dir("gitrepository/ns/name/abc"),
            Err(ArtifactError::Missing(_))
        ));
        assert_eq!(
            ArtifactStore::relative_path("ns", "name", "abc"),
            "gitrepository/ns/name/abc"
        );
    }
}
