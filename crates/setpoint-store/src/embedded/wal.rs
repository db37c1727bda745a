//! The write-ahead log: numbered segment files of checksummed frames. The writer appends one
//! frame per group commit and syncs before anyone is told the writes happened; the compactor
//! removes segments that a snapshot has made redundant.
//!
//! Segments are preallocated (`fallocate`) to their full size when created, so that a sync
//! after an append does not also have to commit a new file size and new blocks — which makes
//! `fdatasync` on a growing file several times slower and erratic (measured in
//! docs/benchmarks.md). Preallocated space reads as zeros, so a segment's frames end either at
//! end of file or at a run of zeros; a closed segment is cut to its used length. On a file
//! system without `fallocate` the segment simply grows.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use setpoint_core::Revision;

use super::codec::{self, FrameError, FrameWriter, LogRecord};
use super::files;
use crate::error::{Result, StoreError};

/// What is known of one segment.
#[derive(Clone, Debug)]
pub(super) struct SegmentInfo {
    pub(super) sequence: u64,
    pub(super) path: PathBuf,
    /// The highest revision logged in it (`ZERO` while it holds none).
    pub(super) last_revision: Revision,
    /// Bytes of frames in it (the file may be longer: preallocated zeros).
    pub(super) bytes: u64,
}

/// Every segment, oldest first; the last is the one being appended to. Shared by the writer
/// (which appends and rotates) and the compactor (which removes old ones).
pub(super) type Segments = Arc<Mutex<Vec<SegmentInfo>>>;

/// The appending end of the log. Owned by the writer thread.
pub(super) struct Wal {
    dir: PathBuf,
    /// The active segment, written at `offset`.
    file: File,
    offset: u64,
    segment_bytes: u64,
    segments: Segments,
}

impl Wal {
    /// Continues the log in `segments` (the last one is appended to after its `bytes`), or
    /// starts the first segment.
    pub(super) fn open(dir: &Path, segments: Vec<SegmentInfo>, segment_bytes: u64) -> Result<Wal> {
        let segments = Arc::new(Mutex::new(segments));
        let last = segments.lock().last().cloned();
        let (file, offset) = match last {
            Some(last) => {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&last.path)
                    .map_err(|e| StoreError::io(format!("opening {}", last.path.display()), e))?;
                preallocate(&file, segment_bytes);
                (file, last.bytes)
            }
            None => create_segment(dir, 1, segment_bytes, &segments)?,
        };
        Ok(Wal {
            dir: dir.to_owned(),
            file,
            offset,
            segment_bytes,
            segments,
        })
    }

    /// The segment list, for the compactor.
    pub(super) fn segments(&self) -> Segments {
        self.segments.clone()
    }

    /// Appends `frames` (holding revisions up to `last_revision`, if any) and syncs them to
    /// disk. When this returns `Ok`, the frames survive a crash. On error the log's tail is
    /// unknown until the next open, and the caller must stop writing.
    pub(super) fn append(&mut self, frames: &[u8], last_revision: Option<Revision>) -> Result<()> {
        let used = self.offset > segment_header_bytes();
        if used && self.offset + frames.len() as u64 > self.segment_bytes {
            self.rotate()?;
        }
        self.file
            .write_all_at(frames, self.offset)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| StoreError::io("appending to the log", e))?;
        self.offset += frames.len() as u64;
        let mut segments = self.segments.lock();
        let active = segments.last_mut().expect("an active segment");
        active.bytes = self.offset;
        if let Some(r) = last_revision {
            active.last_revision = r;
        }
        Ok(())
    }

    /// Closes the active segment (cut to its used length) and starts the next one.
    fn rotate(&mut self) -> Result<()> {
        self.file
            .set_len(self.offset)
            .map_err(|e| StoreError::io("closing a log segment", e))?;
        let sequence = self.segments.lock().last().map_or(1, |s| s.sequence + 1);
        let (file, offset) =
            create_segment(&self.dir, sequence, self.segment_bytes, &self.segments)?;
        self.file = file;
        self.offset = offset;
        Ok(())
    }
}

/// Extends `file` to at least `size` bytes of allocated zeros, where the file system can.
fn preallocate(file: &File, size: u64) {
    if let Err(error) = rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size) {
        tracing::debug!(%error, "cannot preallocate log segments here; they will grow instead");
    }
}

/// The length of a segment's header frame.
fn segment_header_bytes() -> u64 {
    let mut header = FrameWriter::default();
    header.segment_header(0);
    header.bytes().len() as u64
}

/// Creates segment `sequence`, preallocated to `size`, with its header, durably, and adds it
/// to `segments`. Returns the file and where appending continues.
fn create_segment(
    dir: &Path,
    sequence: u64,
    size: u64,
    segments: &Segments,
) -> Result<(File, u64)> {
    let path = files::segment_path(dir, sequence);
    let io_err = |e| StoreError::io(format!("creating {}", path.display()), e);
    let file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(files::FILE_MODE)
        .open(&path)
        .map_err(io_err)?;
    preallocate(&file, size);
    let mut header = FrameWriter::default();
    header.segment_header(sequence);
    file.write_all_at(header.bytes(), 0)
        .and_then(|()| file.sync_all())
        .map_err(io_err)?;
    files::sync_dir(dir)?;
    let bytes = header.bytes().len() as u64;
    segments.lock().push(SegmentInfo {
        sequence,
        path,
        last_revision: Revision::ZERO,
        bytes,
    });
    Ok((file, bytes))
}

/// How a segment's frames end.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Tail {
    /// At end of file, or at preallocated zeros.
    Clean,
    /// In a frame cut short by a crash (last segment only): never acknowledged.
    Torn,
}

/// One segment as read at open.
pub(super) struct SegmentRead {
    pub(super) records: Vec<LogRecord>,
    /// Bytes of valid frames from the start; appending continues here.
    pub(super) valid_bytes: u64,
    pub(super) tail: Tail,
}

/// Reads every record of a segment. Frames end cleanly at end of file or at a run of zeros to
/// end of file (preallocation). In the last segment, a bad frame cut short by end of file or
/// followed only by zeros is a torn write: reported, not an error, since it was never
/// acknowledged. Anything else that fails its checksum is [`StoreError::Corrupt`].
pub(super) fn read_segment(path: &Path, sequence: u64, is_last: bool) -> Result<SegmentRead> {
    let io_err = |e| StoreError::io(format!("reading {}", path.display()), e);
    let file = File::open(path).map_err(io_err)?;
    let len = file.metadata().map_err(io_err)?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut records = Vec::new();
    let mut offset = 0u64;
    let tail = loop {
        match codec::read_frame(&mut reader) {
            Ok(None) => break Tail::Clean,
            Ok(Some(body)) => {
                let body_len = body.len() as u64;
                let record = codec::decode_log(body).map_err(|e| locate(e, path, offset))?;
                if records.is_empty() && record != (LogRecord::SegmentHeader { sequence }) {
                    return Err(StoreError::Corrupt(format!(
                        "{} does not start with its segment header",
                        path.display()
                    )));
                }
                records.push(record);
                offset += codec::FRAME_HEADER as u64 + body_len;
            }
            Err(FrameError::Io(e)) => return Err(io_err(e)),
            Err(bad) => {
                if rest_is_zero(path, offset, len)? {
                    break Tail::Clean;
                }
                // The write in flight at a crash: cut short by end of file, or (in a
                // preallocated file) followed by nothing but zeros.
                let torn = match bad {
                    FrameError::Truncated => true,
                    FrameError::Checksum { len: body } => {
                        let end = offset + (codec::FRAME_HEADER + body) as u64;
                        end >= len || rest_is_zero(path, end, len)?
                    }
                    FrameError::Io(_) => false,
                };
                if is_last && torn {
                    break Tail::Torn;
                }
                return Err(StoreError::Corrupt(format!(
                    "{} fails its checksum at byte {offset} of {len}",
                    path.display()
                )));
            }
        }
    };
    Ok(SegmentRead {
        records,
        valid_bytes: offset,
        tail,
    })
}

fn locate(e: StoreError, path: &Path, offset: u64) -> StoreError {
    match e {
        StoreError::Corrupt(what) => {
            StoreError::Corrupt(format!("{what} in {} at byte {offset}", path.display()))
        }
        other => other,
    }
}

fn rest_is_zero(path: &Path, offset: u64, len: u64) -> Result<bool> {
    let io_err = |e| StoreError::io(format!("reading {}", path.display()), e);
    let mut file = File::open(path).map_err(io_err)?;
    file.seek(SeekFrom::Start(offset)).map_err(io_err)?;
    let mut reader = BufReader::with_capacity(1 << 20, file.take(len.saturating_sub(offset)));
    let mut chunk = [0u8; 1 << 16];
    loop {
        let n = reader.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            return Ok(true);
        }
        if chunk[..n].iter().any(|b| *b != 0) {
            return Ok(false);
        }
    }
}

/// Cuts a torn tail off the last segment, durably.
pub(super) fn truncate(path: &Path, valid_bytes: u64) -> Result<()> {
    let io_err = |e| StoreError::io(format!("truncating {}", path.display()), e);
    let file = OpenOptions::new().write(true).open(path).map_err(io_err)?;
    file.set_len(valid_bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)
}
