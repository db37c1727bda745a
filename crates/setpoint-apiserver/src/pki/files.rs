//! Files that hold credentials. Private files (keys, the token, the kubeconfig) are written
//! `0600` into directories that are `0700`; every write goes to a temporary file that is
//! fsynced and then renamed over the target, so a crash leaves either the old or the new file,
//! never a torn one.

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of directories that hold credentials.
const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of files only the server's user may read.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;
/// Mode of files anyone may read (certificates).
pub(crate) const PUBLIC_FILE_MODE: u32 = 0o644;

/// Creates `dir` (and missing parents) with mode `0700`; an existing directory is tightened to
/// `0700` when `tighten` is set and left as it is otherwise.
pub(crate) fn ensure_private_dir(dir: &Path, tighten: bool) -> io::Result<()> {
    match DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
    {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    if tighten {
        set_mode_if_looser(dir, PRIVATE_DIR_MODE)?;
    }
    Ok(())
}

/// Reads `path` as UTF-8, or `None` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Atomically replaces `path` with `contents`, giving it `mode`.
pub(crate) fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let temporary = temporary_path(path);
    match fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)?;
    // The umask may have cleared bits of `mode` at creation; set it exactly.
    file.set_permissions(Permissions::from_mode(mode))?;
    file.write_all(contents)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&temporary, path)?;
    if let Some(parent) = path.parent() {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// Removes group and other permission bits beyond `mode` from an existing file or directory.
/// Returns whether the mode was changed.
pub(crate) fn set_mode_if_looser(path: &Path, mode: u32) -> io::Result<bool> {
    let current = fs::metadata(path)?.permissions().mode() & 0o777;
    if current & !mode == 0 {
        return Ok(false);
    }
    fs::set_permissions(path, Permissions::from_mode(current & mode))?;
    Ok(true)
}

fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn write_atomically_should_create_file_with_exact_mode_and_replace_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write_atomically(&path, b"one", PRIVATE_FILE_MODE).unwrap();
        assert_eq!(mode(&path), 0o600);
        write_atomically(&path, b"two", PRIVATE_FILE_MODE).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert!(!temporary_path(&path).exists());
    }

    #[test]
    fn ensure_private_dir_should_tighten_an_existing_open_directory() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        fs::create_dir(&pki).unwrap();
        fs::set_permissions(&pki, Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&pki, true).unwrap();
        assert_eq!(mode(&pki), 0o700);
    }

    #[test]
    fn set_mode_if_looser_should_leave_a_stricter_mode_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        write_atomically(&path, b"k", 0o400).unwrap();
        assert!(!set_mode_if_looser(&path, PRIVATE_FILE_MODE).unwrap());
        assert_eq!(mode(&path), 0o400);
    }
}
