//! The write-ahead log: numbered segment files of checksummed frames. The writer appends one
//! frame per group commit and syncs before anyone is told the writes happened; the compactor
//! removes segments that a snapshot has made redundant.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
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
    pub(super) bytes: u64,
}

/// Every segment, oldest first; the last is the one being appended to. Shared by the writer
/// (which appends and rotates) and the compactor (which removes old ones).
pub(super) type Segments = Arc<Mutex<Vec<SegmentInfo>>>;

/// The appending end of the log. Owned by the writer thread.
pub(super) struct Wal {
    dir: PathBuf,
    file: File,
    segment_bytes: u64,
    segments: Segments,
}

impl Wal {
    /// Continues the log in `segments` (whose last one is open for appending at its end), or
    /// starts the first segment.
    pub(super) fn open(dir: &Path, segments: Vec<SegmentInfo>, segment_bytes: u64) -> Result<Wal> {
        let segments = Arc::new(Mutex::new(segments));
        let last = segments.lock().last().cloned();
        let file = match last {
            Some(last) => OpenOptions::new()
                .append(true)
                .open(&last.path)
                .map_err(|e| StoreError::io(format!("opening {}", last.path.display()), e))?,
            None => create_segment(dir, 1, &segments)?,
        };
        Ok(Wal {
            dir: dir.to_owned(),
            file,
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
        let full = self
            .segments
            .lock()
            .last()
            .is_some_and(|s| s.bytes >= self.segment_bytes);
        if full {
            let sequence = self.segments.lock().last().map_or(1, |s| s.sequence + 1);
            self.file = create_segment(&self.dir, sequence, &self.segments)?;
        }
        self.file
            .write_all(frames)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| StoreError::io("appending to the log", e))?;
        let mut segments = self.segments.lock();
        let active = segments.last_mut().expect("an active segment");
        active.bytes += frames.len() as u64;
        if let Some(r) = last_revision {
            active.last_revision = r;
        }
        Ok(())
    }
}

/// Creates segment `sequence` with its header, durably, and adds it to `segments`.
fn create_segment(dir: &Path, sequence: u64, segments: &Segments) -> Result<File> {
    let path = files::segment_path(dir, sequence);
    let mut header = FrameWriter::default();
    header.segment_header(sequence);
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(|e| StoreError::io(format!("creating {}", path.display()), e))?;
    file.write_all(header.bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
    files::sync_dir(dir)?;
    segments.lock().push(SegmentInfo {
        sequence,
        path,
        last_revision: Revision::ZERO,
        bytes: header.bytes().len() as u64,
    });
    Ok(file)
}

/// One segment as read at open.
pub(super) struct SegmentRead {
    pub(super) records: Vec<LogRecord>,
    /// Bytes of valid frames from the start; a torn tail starts here.
    pub(super) valid_bytes: u64,
    /// Whether the file has a torn tail after `valid_bytes`.
    pub(super) torn: bool,
}

/// Reads every record of a segment. In the last segment a torn tail (a frame cut short by a
/// crash, or zeros where the file system extended the file) is reported, not an error: it was
/// never acknowledged. Anything else that fails its checksum is [`StoreError::Corrupt`].
pub(super) fn read_segment(path: &Path, sequence: u64, is_last: bool) -> Result<SegmentRead> {
    let io_err = |e| StoreError::io(format!("reading {}", path.display()), e);
    let file = File::open(path).map_err(io_err)?;
    let len = file.metadata().map_err(io_err)?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut records = Vec::new();
    let mut offset = 0u64;
    loop {
        match codec::read_frame(&mut reader) {
            Ok(None) => break,
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
                let torn = is_last
                    && (matches!(bad, FrameError::Truncated) || rest_is_zero(path, offset, len)?);
                if !torn {
                    return Err(StoreError::Corrupt(format!(
                        "{} fails its checksum at byte {offset} of {len}",
                        path.display()
                    )));
                }
                return Ok(SegmentRead {
                    records,
                    valid_bytes: offset,
                    torn: true,
                });
            }
        }
    }
    Ok(SegmentRead {
        records,
        valid_bytes: offset,
        torn: false,
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
    let mut rest = Vec::with_capacity((len - offset.min(len)) as usize);
    file.read_to_end(&mut rest).map_err(io_err)?;
    Ok(rest.iter().all(|b| *b == 0))
}

/// Cuts a torn tail off the last segment, durably.
pub(super) fn truncate(path: &Path, valid_bytes: u64) -> Result<()> {
    let io_err = |e| StoreError::io(format!("truncating {}", path.display()), e);
    let file = OpenOptions::new().write(true).open(path).map_err(io_err)?;
    file.set_len(valid_bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)
}
