//! The atomic writer: a volume directory whose files (a ConfigMap's keys, a Secret's, the
//! downward API's) change all at once, never half-written, as the kubelet's volumes do.
//!
//! Layout of a volume directory `V`:
//! - `V/..<stamp>/`: one complete copy of the payload (`<stamp>` is the write's time in
//!   nanoseconds, so every write gets a new directory);
//! - `V/..data`: a symlink to the current `..<stamp>` directory, replaced by `rename(2)` of a
//!   new symlink over it — the one atomic step of an update;
//! - `V/<name>` for each top-level entry of the payload: a symlink to `..data/<name>`, so a
//!   reader following it sees either the old or the new payload, never a mix.
//!
//! A write whose payload equals what `..data` shows changes nothing, so writing on every sync
//! is cheap and idempotent. Names starting with `..` are refused in payloads (they are the
//! writer's own).

use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};

/// The symlink naming the current payload directory.
const DATA: &str = "..data";
/// The name the next `..data` symlink is made under before it is renamed over `..data`.
const DATA_TMP: &str = "..data_tmp";

/// One file of a payload: its content and permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileContent {
    /// The bytes.
    pub(crate) data: Vec<u8>,
    /// Permission bits (e.g. `0o644`).
    pub(crate) mode: u32,
}

/// A volume's files: relative path (`key`, `dir/key`) → content.
pub(crate) type Payload = BTreeMap<String, FileContent>;

/// Why a payload could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AtomicWriteError {
    /// A path in the payload is absolute, has `..`, or starts with `..`.
    #[error("invalid path {0:?} in the volume's payload")]
    InvalidPath(String),
    /// A file-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> AtomicWriteError {
    let what = what.into();
    move |source| AtomicWriteError::Io { what, source }
}

/// Checks a payload path: relative, no `.`/`..` components, not starting with `..`.
pub(crate) fn valid_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with("..")
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// Makes `dir` show exactly `payload`; returns whether anything changed.
pub(crate) fn write(dir: &Path, payload: &Payload) -> Result<bool, AtomicWriteError> {
    for path in payload.keys() {
        if !valid_path(path) {
            return Err(AtomicWriteError::InvalidPath(path.clone()));
        }
    }
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let old = std::fs::read_link(dir.join(DATA)).ok();
    if let Some(old) = &old {
        if matches_payload(&dir.join(old), payload) {
            ensure_user_links(dir, payload)?;
            return Ok(false);
        }
    }
    let stamp = format!(
        "..{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let new_dir = dir.join(&stamp);
    std::fs::create_dir(&new_dir).map_err(io(format!("creating {}", new_dir.display())))?;
    std::fs::set_permissions(&new_dir, std::fs::Permissions::from_mode(0o755))
        .map_err(io(format!("setting the mode of {}", new_dir.display())))?;
    for (path, file) in payload {
        let target = new_dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("creating {}", parent.display())))?;
        }
        write_file(&target, file)?;
    }
    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&stamp, &tmp).map_err(io(format!("linking {}", tmp.display())))?;
    std::fs::rename(&tmp, dir.join(DATA))
        .map_err(io(format!("switching {}", dir.join(DATA).display())))?;
    ensure_user_links(dir, payload)?;
    if let Some(old) = old {
        let old_dir = dir.join(old);
        if old_dir != new_dir {
            let _ = std::fs::remove_dir_all(old_dir);
        }
    }
    Ok(true)
}

fn write_file(target: &Path, file: &FileContent) -> Result<(), AtomicWriteError> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(file.mode)
        .open(target)
        .map_err(io(format!("creating {}", target.display())))?;
    f.write_all(&file.data)
        .map_err(io(format!("writing {}", target.display())))?;
    // The mode given at creation is filtered by the umask; set it exactly.
    std::fs::set_permissions(target, std::fs::Permissions::from_mode(file.mode))
        .map_err(io(format!("setting the mode of {}", target.display())))
}

/// The top-level names of a payload's paths.
fn top_level(payload: &Payload) -> std::collections::BTreeSet<String> {
    payload
        .keys()
        .filter_map(|p| p.split('/').next().map(str::to_owned))
        .collect()
}

/// Creates `dir/<name> -> ..data/<name>` for every top-level name, and removes the user
/// links of names no longer in the payload.
fn ensure_user_links(dir: &Path, payload: &Payload) -> Result<(), AtomicWriteError> {
    let names = top_level(payload);
    for name in &names {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            let target = PathBuf::from(DATA).join(name);
            std::os::unix::fs::symlink(&target, &link)
                .map_err(io(format!("linking {}", link.display())))?;
        }
    }
    let entries = std::fs::read_dir(dir).map_err(io(format!("reading {}", dir.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") || names.contains(&name) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Whether `data_dir` holds exactly `payload` (contents and modes).
fn matches_payload(data_dir: &Path, payload: &Payload) -> bool {
    let mut found = 0usize;
    if !count_files(data_dir, &mut found) || found != payload.len() {
        return false;
    }
    payload.iter().all(|(path, file)| {
        let target = data_dir.join(path);
        let same_mode =
            std::fs::metadata(&target).is_ok_and(|m| m.permissions().mode() & 0o7777 == file.mode);
        same_mode && std::fs::read(&target).is_ok_and(|d| d == file.data)
    })
}

fn count_files(dir: &Path, found: &mut usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => {
                if !count_files(&entry.path(), found) {
                    return false;
                }
            }
            Ok(_) => *found += 1,
            Err(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(entries: &[(&str, &str)]) -> Payload {
        entries
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_owned(),
                    FileContent {
                        data: v.as_bytes().to_vec(),
                        mode: 0o644,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn write_should_swap_data_and_keep_user_links_through_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("vol");
        assert!(write(&dir, &payload(&[("a", "1"), ("sub/b", "2")])).expect("write"));
        assert_eq!(std::fs::read_to_string(dir.join("a")).expect("a"), "1");
        assert_eq!(std::fs::read_to_string(dir.join("sub/b")).expect("b"), "2");
        assert!(std::fs::symlink_metadata(dir.join("a"))
            .expect("a")
            .file_type()
            .is_symlink());
        let first = std::fs::read_link(dir.join(DATA)).expect("..data");

        assert!(!write(&dir, &payload(&[("a", "1"), ("sub/b", "2")])).expect("same"));
        assert_eq!(std::fs::read_link(dir.join(DATA)).expect("..data"), first);

        assert!(write(&dir, &payload(&[("a", "changed")])).expect("update"));
        assert_eq!(
            std::fs::read_to_string(dir.join("a")).expect("a"),
            "changed"
        );
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
        assert!(!dir.join(&first).exists(), "the old payload is removed");
    }

    #[test]
    fn write_should_set_modes_exactly_and_refuse_escaping_paths() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut p = payload(&[("k", "v")]);
        if let Some(f) = p.get_mut("k") {
            f.mode = 0o400;
        }
        write(tmp.path(), &p).expect("write");
        let mode = std::fs::metadata(tmp.path().join("k"))
            .expect("k")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o400);
        for bad in ["../x", "/abs", "..data", "a/../b"] {
            assert!(write(tmp.path(), &payload(&[(bad, "v")])).is_err(), "{bad}");
        }
    }
}
