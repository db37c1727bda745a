//! The audit log file, rotated by size as kube-apiserver's (lumberjack) is: a line that would
//! take the file past `max_size` bytes first moves it aside as `NAME-<UTC time>EXT`
//! (`audit-2026-11-28T06-00-00.000.log`) and starts a new one; then the oldest backups beyond
//! `max_backups` (0: keep all) and those older than `max_age` (none: keep all) are removed.
//! Files are created mode 0600, their directory 0700. Writes are buffered until
//! [`RotatingFile::flush`].

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};

/// The time format in a backup's name.
const BACKUP_TIME: &str = "%Y-%m-%dT%H-%M-%S%.3f";

/// How the log is rotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rotation {
    /// The largest a file may grow, in bytes; 0: no limit.
    pub(crate) max_size: u64,
    /// How long backups are kept; `None`: no limit.
    pub(crate) max_age: Option<Duration>,
    /// How many backups are kept; 0: all.
    pub(crate) max_backups: usize,
}

/// An append-only log file, rotated by size.
pub(crate) struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    /// The open file; `None` until the first write (or after a failed rotation).
    file: Option<File>,
    /// The file's size, counting `pending`.
    size: u64,
    /// Lines written but not yet flushed to `file`.
    pending: Vec<u8>,
}

impl RotatingFile {
    /// A log at `path` (its directory is created, mode 0700, if missing). Fails if the file
    /// cannot be opened for appending.
    pub(crate) fn open(path: &Path, rotation: Rotation) -> io::Result<RotatingFile> {
        let mut log = RotatingFile {
            path: path.to_owned(),
            rotation,
            file: None,
            size: 0,
            pending: Vec::new(),
        };
        log.open_current()?;
        Ok(log)
    }

    /// Appends `line`, rotating first if it would not fit.
    pub(crate) fn write(&mut self, line: &[u8]) -> io::Result<()> {
        if self.file.is_none() {
            self.open_current()?;
        }
        let len = line.len() as u64;
        if self.rotation.max_size > 0 && self.size > 0 && self.size + len > self.rotation.max_size {
            self.rotate()?;
        }
        self.pending.extend_from_slice(line);
        self.size += len;
        Ok(())
    }

    /// Writes what is buffered to the file.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let Some(file) = self.file.as_mut() else {
            return Err(io::Error::other("the audit log is not open"));
        };
        let result = file.write_all(&self.pending);
        self.pending.clear();
        result
    }

    fn open_current(&mut self) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(file);
        Ok(())
    }

    /// Moves the current file aside, starts a new one and removes surplus backups.
    fn rotate(&mut self) -> io::Result<()> {
        self.flush()?;
        self.file = None;
        let backup = self.free_backup_name(Utc::now());
        std::fs::rename(&self.path, &backup)?;
        self.open_current()?;
        self.remove_old_backups(Utc::now());
        Ok(())
    }

    /// `NAME-<time>EXT` for `now`, a millisecond later for each backup that already has it.
    fn free_backup_name(&self, now: DateTime<Utc>) -> PathBuf {
        let mut time = now;
        loop {
            let candidate = self.backup_name(time);
            if !candidate.exists() {
                return candidate;
            }
            time += chrono::Duration::milliseconds(1);
        }
    }

    fn stem_and_extension(&self) -> (String, String) {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.rfind('.') {
            Some(dot) if dot > 0 => (name[..dot].to_owned(), name[dot..].to_owned()),
            _ => (name, String::new()),
        }
    }

    fn backup_name(&self, time: DateTime<Utc>) -> PathBuf {
        let (stem, extension) = self.stem_and_extension();
        self.path
            .with_file_name(format!("{stem}-{}{extension}", time.format(BACKUP_TIME)))
    }

    /// The backups of this log, newest first.
    pub(crate) fn backups(&self) -> Vec<(DateTime<Utc>, PathBuf)> {
        let (stem, extension) = self.stem_and_extension();
        let prefix = format!("{stem}-");
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut backups: Vec<(DateTime<Utc>, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let time = name.strip_prefix(&prefix)?.strip_suffix(&extension)?;
                let time = NaiveDateTime::parse_from_str(time, BACKUP_TIME).ok()?;
                Some((time.and_utc(), entry.path()))
            })
            .collect();
        backups.sort_by_key(|b| std::cmp::Reverse(b.0));
        backups
    }

    fn remove_old_backups(&self, now: DateTime<Utc>) {
        let cutoff = self
            .rotation
            .max_age
            .and_then(|age| chrono::Duration::from_std(age).ok())
            .map(|age| now - age);
        for (i, (time, path)) in self.backups().into_iter().enumerate() {
            let surplus = self.rotation.max_backups > 0 && i >= self.rotation.max_backups;
            let expired = cutoff.is_some_and(|cutoff| time < cutoff);
            if surplus || expired {
                if let Err(error) = std::fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), %error, "cannot remove an old audit log");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_in(path: &Path) -> usize {
        std::fs::read_to_string(path).unwrap().lines().count()
    }

    #[test]
    fn a_full_file_should_be_moved_aside_and_only_max_backups_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit").join("audit.log");
        let rotation = Rotation {
            max_size: 100,
            max_age: None,
            max_backups: 3,
        };
        let mut log = RotatingFile::open(&path, rotation).unwrap();
        let line = [b'x'; 39].iter().chain(b"\n").copied().collect::<Vec<u8>>();
        for _ in 0..20 {
            log.write(&line).unwrap();
        }
        log.flush().unwrap();
        // Two 40-byte lines fit in 100 bytes: 10 files were written, the last is current.
        assert_eq!(lines_in(&path), 2);
        let backups = log.backups();
        assert_eq!(backups.len(), 3, "{backups:?}");
        for (_, backup) in &backups {
            assert_eq!(lines_in(backup), 2);
            let name = backup.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name.starts_with("audit-") && name.ends_with(".log"),
                "{name}"
            );
        }
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn an_existing_log_should_be_appended_to_and_old_backups_expire() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, "old\n").unwrap();
        let stale = dir.path().join("audit-2001-01-01T00-00-00.000.log");
        std::fs::write(&stale, "stale\n").unwrap();
        std::fs::write(dir.path().join("other-2001-01-01T00-00-00.000.log"), "").unwrap();
        let rotation = Rotation {
            max_size: 10,
            max_age: Some(Duration::from_secs(86_400)),
            max_backups: 0,
        };
        let mut log = RotatingFile::open(&path, rotation).unwrap();
        log.write(b"new\n").unwrap();
        log.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\nnew\n");
        log.write(b"rotated\n").unwrap();
        log.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "rotated\n");
        assert!(
            !stale.exists(),
            "a backup older than max_age should be gone"
        );
        assert_eq!(log.backups().len(), 1);
        assert!(dir
            .path()
            .join("other-2001-01-01T00-00-00.000.log")
            .exists());
    }
}
