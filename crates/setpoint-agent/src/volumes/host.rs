//! Volumes backed by host directories: `emptyDir` (a directory under the pod's; `medium:
//! Memory` a tmpfs when the agent may mount), `hostPath` (with its `type` checks) and
//! `persistentVolumeClaim` (the bound PersistentVolume's `local` or `hostPath` directory).

use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim,
};
use setpoint_runtime::Client;

use super::sources::SourceError;

/// The annotation the local provisioner puts on the PersistentVolumes it makes: the agent
/// creates their directory on first mount (and deletes it when the volume is released with
/// reclaim policy `Delete`).
pub const LOCAL_PATH_ANNOTATION: &str = "setpoint.dev/local-path";

/// Prepares an `emptyDir` at `dir`. With `may_mount` and `medium: Memory`, `dir` becomes a
/// tmpfs (of `sizeLimit` bytes if set); otherwise a plain directory. Returns a note when a
/// requested memory medium or size limit is not in force.
pub(crate) fn empty_dir(
    dir: &Path,
    spec: &EmptyDirVolumeSource,
    may_mount: bool,
) -> Result<Option<String>, SourceError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| SourceError(format!("creating {}: {e}", dir.display())))?;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777));
    let memory = spec.medium.as_deref() == Some("Memory");
    if !memory {
        return Ok(spec.size_limit.as_ref().map(|_| {
            "sizeLimit of a disk emptyDir is not enforced by setpoint's agent".to_owned()
        }));
    }
    if !may_mount {
        return Ok(Some(
            "medium Memory: the agent cannot mount, so the emptyDir is a directory on disk and its sizeLimit is not enforced".to_owned(),
        ));
    }
    if is_mount_point(dir) {
        return Ok(None);
    }
    let mut options = "mode=0777".to_owned();
    if let Some(limit) = &spec.size_limit {
        let bytes = setpoint_core::quantity::scaled_value(&limit.0, 0)
            .filter(|b| *b > 0)
            .ok_or_else(|| SourceError(format!("invalid sizeLimit {:?}", limit.0)))?;
        options.push_str(&format!(",size={bytes}"));
    }
    let options =
        std::ffi::CString::new(options).map_err(|e| SourceError(format!("tmpfs options: {e}")))?;
    rustix::mount::mount(
        "tmpfs",
        dir,
        "tmpfs",
        rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
        options.as_c_str(),
    )
    .map_err(|e| SourceError(format!("mounting a tmpfs on {}: {e}", dir.display())))?;
    Ok(None)
}

/// Whether `dir` is a mount point (its device differs from its parent's).
pub(crate) fn is_mount_point(dir: &Path) -> bool {
    let (Ok(here), Some(Ok(parent))) = (rustix::fs::stat(dir), dir.parent().map(rustix::fs::stat))
    else {
        return false;
    };
    here.st_dev != parent.st_dev
}

/// Checks (and for the `…OrCreate` types, creates) a `hostPath`; returns its path.
pub(crate) fn host_path(spec: &HostPathVolumeSource) -> Result<PathBuf, SourceError> {
    let path = PathBuf::from(&spec.path);
    if !path.is_absolute() {
        return Err(SourceError(format!(
            "hostPath {:?} is not absolute",
            spec.path
        )));
    }
    let kind = spec.type_.as_deref().unwrap_or("");
    let meta = std::fs::metadata(&path);
    let fail = |what: &str| {
        Err(SourceError(format!(
            "hostPath type check failed: {} is not {what}",
            spec.path
        )))
    };
    match kind {
        "" => {}
        "DirectoryOrCreate" => {
            if meta.is_err() {
                std::fs::create_dir_all(&path)
                    .map_err(|e| SourceError(format!("creating {}: {e}", path.display())))?;
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
            } else if !meta.as_ref().is_ok_and(std::fs::Metadata::is_dir) {
                return fail("a directory");
            }
        }
        "Directory" => {
            if !meta.is_ok_and(|m| m.is_dir()) {
                return fail("a directory");
            }
        }
        "FileOrCreate" => {
            if meta.is_err() {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(|e| SourceError(format!("creating {}: {e}", path.display())))?;
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644));
            } else if !meta.as_ref().is_ok_and(std::fs::Metadata::is_file) {
                return fail("a file");
            }
        }
        "File" => {
            if !meta.is_ok_and(|m| m.is_file()) {
                return fail("a file");
            }
        }
        "Socket" => {
            if !meta.is_ok_and(|m| m.file_type().is_socket()) {
                return fail("a socket");
            }
        }
        "CharDevice" => {
            if !meta.is_ok_and(|m| m.file_type().is_char_device()) {
                return fail("a character device");
            }
        }
        "BlockDevice" => {
            if !meta.is_ok_and(|m| m.file_type().is_block_device()) {
                return fail("a block device");
            }
        }
        other => {
            return Err(SourceError(format!("unknown hostPath type {other:?}")));
        }
    }
    Ok(path)
}

/// The directory of the PersistentVolume bound to claim `claim_name`; created if the local
/// provisioner made the volume and it does not exist yet.
pub(crate) async fn claim_path(
    client: &Client,
    namespace: &str,
    claim_name: &str,
) -> Result<PathBuf, SourceError> {
    let claim = client
        .namespaced_api::<PersistentVolumeClaim>(namespace)
        .get_opt(claim_name)
        .await
        .map_err(|e| SourceError(format!("reading persistentvolumeclaim {claim_name:?}: {e}")))?
        .ok_or_else(|| SourceError(format!("persistentvolumeclaim {claim_name:?} not found")))?;
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(SourceError(format!(
            "persistentvolumeclaim {claim_name:?} is being deleted"
        )));
    }
    let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone());
    let (true, Some(volume_name)) = (bound, volume_name) else {
        return Err(SourceError(format!(
            "persistentvolumeclaim {claim_name:?} is not bound"
        )));
    };
    let volume = client
        .api::<PersistentVolume>()
        .get_opt(&volume_name)
        .await
        .map_err(|e| SourceError(format!("reading persistentvolume {volume_name:?}: {e}")))?
        .ok_or_else(|| SourceError(format!("persistentvolume {volume_name:?} not found")))?;
    let spec = volume.spec.unwrap_or_default();
    let path = spec
        .local
        .map(|l| l.path)
        .or_else(|| spec.host_path.map(|h| h.path))
        .ok_or_else(|| {
            SourceError(format!(
                "persistentvolume {volume_name:?} has no local or hostPath source (the only kinds this agent mounts)"
            ))
        })?;
    let path = PathBuf::from(path);
    let provisioned = volume
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(LOCAL_PATH_ANNOTATION));
    if provisioned && !path.exists() {
        std::fs::create_dir_all(&path)
            .map_err(|e| SourceError(format!("creating {}: {e}", path.display())))?;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777));
    }
    if !path.exists() {
        return Err(SourceError(format!(
            "the path {} of persistentvolume {volume_name:?} does not exist on this node",
            path.display()
        )));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(path: &Path, kind: &str) -> HostPathVolumeSource {
        HostPathVolumeSource {
            path: path.display().to_string(),
            type_: Some(kind.to_owned()),
        }
    }

    #[test]
    fn host_path_should_check_types_and_create_when_asked() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("d");
        assert!(host_path(&spec(&dir, "Directory")).is_err());
        assert_eq!(
            host_path(&spec(&dir, "DirectoryOrCreate")).expect("made"),
            dir
        );
        assert!(dir.is_dir());
        assert!(host_path(&spec(&dir, "File")).is_err());
        let file = tmp.path().join("f");
        host_path(&spec(&file, "FileOrCreate")).expect("made");
        assert!(file.is_file());
        assert!(host_path(&spec(&file, "Directory")).is_err());
        assert!(host_path(&spec(&file, "Socket")).is_err());
        assert!(host_path(&spec(Path::new("relative"), "")).is_err());
        assert!(host_path(&spec(&file, "Bogus")).is_err());
    }
}
