//! Snapshots: every live key at one revision, in one checksummed file. A snapshot at revision
//! `C` replaces every log record up to `C`, so the segments holding only such records can go.
//! A snapshot is written to a temporary file, synced, then renamed into place: a crash leaves
//! either the old set of files or the new one.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use setpoint_core::Revision;

use super::codec::{self, FrameError, FrameWriter, SnapshotEntry, SnapshotRecord};
use super::files;
use super::state::{Entry, Index};
use crate::error::{Result, StoreError};

/// Writes `index`, the state at `revision`, as a snapshot in `dir`. Returns its path and size.
pub(super) fn write(dir: &Path, revision: Revision, index: &Index) -> Result<(PathBuf, u64)> {
    let path = files::snapshot_path(dir, revision);
    let tmp = path.with_extension("tmp");
    let io_err = |e| StoreError::io(format!("writing snapshot {}", tmp.display()), e);
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(files::FILE_MODE)
        .open(&tmp)
        .map_err(io_err)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut frames = FrameWriter::default();
    let mut bytes = 0u64;
    let mut flush = |frames: &mut FrameWriter, out: &mut BufWriter<File>| -> std::io::Result<()> {
        out.write_all(frames.bytes())?;
        bytes += frames.bytes().len() as u64;
        frames.clear();
        Ok(())
    };
    frames.snapshot_header(revision, index.len() as u64);
    for (key, e) in index.iter() {
        frames.snapshot_entry(&SnapshotEntry {
            key: key.clone(),
            value: e.value.clone(),
            create: e.create,
            modified: e.modified,
            version: e.version,
        });
        if frames.bytes().len() >= 1 << 16 {
            flush(&mut frames, &mut out).map_err(io_err)?;
        }
    }
    frames.snapshot_footer(index.len() as u64);
    flush(&mut frames, &mut out).map_err(io_err)?;
    let file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
    file.sync_all().map_err(io_err)?;
    drop(file);
    std::fs::rename(&tmp, &path)
        .map_err(|e| StoreError::io(format!("renaming {}", tmp.display()), e))?;
    files::sync_dir(dir)?;
    Ok((path, bytes))
}

/// Reads a snapshot whole, verifying every checksum and the entry count.
pub(super) fn read(path: &Path) -> Result<(Index, Revision)> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("snapshot {}: {what}", path.display()));
    let file = File::open(path)
        .map_err(|e| StoreError::io(format!("opening snapshot {}", path.display()), e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut next = || -> Result<Option<SnapshotRecord>> {
        match codec::read_frame(&mut reader) {
            Ok(Some(body)) => codec::decode_snapshot(body).map(Some),
            Ok(None) => Ok(None),
            Err(FrameError::Io(e)) => Err(StoreError::io(format!("reading {}", path.display()), e)),
            Err(FrameError::Truncated) => Err(corrupt("cut short")),
            Err(FrameError::Checksum { .. }) => Err(corrupt("checksum mismatch")),
        }
    };
    let Some(SnapshotRecord::Header { revision, count }) = next()? else {
        return Err(corrupt("missing header"));
    };
    let mut index = Index::new();
    let mut last_key = None;
    loop {
        match next()? {
            Some(SnapshotRecord::Entry(e)) => {
                if last_key.as_ref().is_some_and(|k| *k >= e.key) || e.modified > revision {
                    return Err(corrupt("entries out of order or from the future"));
                }
                last_key = Some(e.key.clone());
                index.insert(
                    e.key,
                    Entry {
                        value: e.value,
                        create: e.create,
                        modified: e.modified,
                        version: e.version,
                    },
                );
            }
            Some(SnapshotRecord::Footer { count: footer }) => {
                if footer != count || index.len() as u64 != count || next()?.is_some() {
                    return Err(corrupt("entry count does not match"));
                }
                return Ok((index, revision));
            }
            Some(SnapshotRecord::Header { .. }) => return Err(corrupt("second header")),
            None => return Err(corrupt("missing footer")),
        }
    }
}
