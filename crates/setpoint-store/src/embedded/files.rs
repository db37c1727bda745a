//! The data directory: which files exist, what they are called, and the small file-system
//! operations (durable rename, directory sync, exclusive lock) the log and snapshots rely on.
//!
//! ```text
//! DIR/LOCK                         held (flock) while a process has the store open
//! DIR/wal-<sequence:016x>.log      log segments, appended in sequence order
//! DIR/snap-<revision:016x>.snap    snapshots: every live key as of that revision
//! DIR/snap-<revision:016x>.tmp    a snapshot being written; removed at open
//! ```
//!
//! The directory is private to the store's user: created 0700 (an existing one with group or
//! other bits is tightened to 0700 at open, with a warning), and every file in it 0600.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use setpoint_core::Revision;

use crate::error::{Result, StoreError};

/// What the data directory holds, sorted oldest first.
#[derive(Debug, Default)]
pub(super) struct DirListing {
    /// `(sequence, path)` of every log segment.
    pub(super) segments: Vec<(u64, PathBuf)>,
    /// `(revision, path)` of every snapshot.
    pub(super) snapshots: Vec<(Revision, PathBuf)>,
}

pub(super) fn segment_path(dir: &Path, sequence: u64) -> PathBuf {
    dir.join(format!("wal-{sequence:016x}.log"))
}

pub(super) fn snapshot_path(dir: &Path, revision: Revision) -> PathBuf {
    dir.join(format!("snap-{:016x}.snap", revision.get()))
}

/// Mode of the data directory: only its owner may list or enter it.
pub(super) const DIR_MODE: u32 = 0o700;
/// Mode of every file the store creates: only its owner may read or write it.
pub(super) const FILE_MODE: u32 = 0o600;

/// Creates the directory (mode 0700) if needed, tightens an existing one and the files in it
/// that group or others could read, and takes its exclusive lock, held as long as the returned
/// file is open.
pub(super) fn create_and_lock(dir: &Path) -> Result<File> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(|e| StoreError::io(format!("creating data directory {}", dir.display()), e))?;
    tighten(dir, DIR_MODE)?;
    let lock_path = dir.join("LOCK");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(FILE_MODE)
        .open(&lock_path)
        .map_err(|e| StoreError::io(format!("opening {}", lock_path.display()), e))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(fs::TryLockError::WouldBlock) => Err(StoreError::Unavailable(format!(
            "data directory {} is in use by another process",
            dir.display()
        ))),
        Err(fs::TryLockError::Error(e)) => Err(StoreError::io(
            format!("locking {}", lock_path.display()),
            e,
        )),
    }
}

/// Removes the group and other bits beyond `mode` from `path` (an older version, or the user,
/// may have left it readable by others), saying so in the log.
fn tighten(path: &Path, mode: u32) -> Result<()> {
    let meta = fs::metadata(path)
        .map_err(|e| StoreError::io(format!("reading the mode of {}", path.display()), e))?;
    let current = meta.permissions().mode() & 0o777;
    if current & !mode == 0 {
        return Ok(());
    }
    fs::set_permissions(path, fs::Permissions::from_mode(current & mode))
        .map_err(|e| StoreError::io(format!("tightening the mode of {}", path.display()), e))?;
    tracing::warn!(
        path = %path.display(),
        was = format!("{current:o}"),
        now = format!("{:o}", current & mode),
        "store data was readable by other users; tightened its mode"
    );
    Ok(())
}

/// Lists segments and snapshots. With `remove_temporaries` (only while opening, when nothing
/// else can be writing one), removes the temporary files a crash left.
pub(super) fn list(dir: &Path, remove_temporaries: bool) -> Result<DirListing> {
    let mut listing = DirListing::default();
    let entries = fs::read_dir(dir)
        .map_err(|e| StoreError::io(format!("reading directory {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("reading directory entry", e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        if remove_temporaries && entry.file_type().is_ok_and(|t| t.is_file()) {
            tighten(&path, FILE_MODE)?;
        }
        if let Some(hex) = name
            .strip_prefix("wal-")
            .and_then(|n| n.strip_suffix(".log"))
        {
            if let Ok(seq) = u64::from_str_radix(hex, 16) {
                listing.segments.push((seq, path));
            }
        } else if let Some(hex) = name
            .strip_prefix("snap-")
            .and_then(|n| n.strip_suffix(".snap"))
        {
            if let Ok(rev) = u64::from_str_radix(hex, 16) {
                listing.snapshots.push((Revision(rev), path));
            }
        } else if remove_temporaries && name.ends_with(".tmp") {
            remove(&path)?;
        }
    }
    listing.segments.sort();
    listing.snapshots.sort();
    Ok(listing)
}

/// Makes the directory's entries (creations, renames, removals) durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(format!("syncing directory {}", dir.display()), e))
}

pub(super) fn remove(path: &Path) -> Result<()> {
    fs::remove_file(path).map_err(|e| StoreError::io(format!("removing {}", path.display()), e))
}

/// Total size of the regular files in `dir`.
pub(super) fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}
