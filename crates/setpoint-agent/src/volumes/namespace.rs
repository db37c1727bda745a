//! The shim's side of mounts: before starting the container, the shim moves into a mount
//! namespace of its own (the container inherits it), makes every mount in it private (so
//! nothing mounted here reaches the host, and nothing the host mounts later reaches here),
//! and bind-mounts each volume at its `mountPath`, read-only where asked.
//!
//! A `mountPath` that does not exist on the host is created there (a directory, or an empty
//! file for a file volume), with its missing parents — an empty mount point, never written
//! through from the host side; existing host files at a `mountPath` are only hidden, inside
//! the container's namespace. Nothing is mounted over a parent directory: a tmpfs over `/`
//! or `/etc` to make room would hide the host's files from the container's process, which
//! (without an image) needs them.

use std::path::Path;

use rustix::mount::{MountFlags, MountPropagationFlags};

use super::MountSpec;

/// Enters a new mount namespace and mounts `mounts` in it. On error the shim stays in
/// whatever namespace it reached; the caller decides whether to go on without mounts.
pub(crate) fn enter(mounts: &[MountSpec]) -> Result<(), String> {
    // `unshare` is deprecated in favour of an `unsafe` variant because of `CLONE_FILES`
    // (which can invalidate descriptors other threads hold); only `CLONE_NEWNS` is asked
    // here, and the shim has not started any thread yet.
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNS)
        .map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    for mount in mounts {
        bind(mount)?;
    }
    Ok(())
}

fn bind(mount: &MountSpec) -> Result<(), String> {
    let target = &mount.target;
    if std::fs::symlink_metadata(target).is_err() {
        make_mount_point(&mount.source, target)?;
    }
    rustix::mount::mount_bind_recursive(&mount.source, target).map_err(|e| {
        format!(
            "bind-mounting {} at {}: {e}",
            mount.source.display(),
            target.display()
        )
    })?;
    if mount.read_only {
        rustix::mount::mount_remount(target, MountFlags::BIND | MountFlags::RDONLY, "")
            .map_err(|e| format!("making {} read-only: {e}", target.display()))?;
    }
    Ok(())
}

/// Creates `target` as a directory, or as an empty file if `source` is a file.
fn make_mount_point(source: &Path, target: &Path) -> Result<(), String> {
    let is_file = std::fs::metadata(source).is_ok_and(|m| !m.is_dir());
    let create = if is_file {
        target
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(target)
                    .map(drop)
            })
    } else {
        std::fs::create_dir_all(target)
    };
    create.map_err(|e| format!("creating the mount point {}: {e}", target.display()))
}
