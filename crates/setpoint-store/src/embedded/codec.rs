//! The on-disk encoding shared by log segments and snapshots: checksummed frames holding
//! tagged records. Every byte that reaches disk is inside a frame, and every frame is verified
//! before its content is used, so corrupt data is reported, never served.
//!
//! A frame is `len: u32 LE | crc32c(body): u32 LE | body[len]`. Bodies start with a tag byte:
//!
//! | tag | record | fields (integers little-endian) |
//! |---|---|---|
//! | 1 | batch of writes | `first_revision u64, count u32`, then per write `kind u8 (1 put, 2 delete), key_len u32, key, [value_len u32, value]` |
//! | 2 | compaction | `revision u64` |
//! | 3 | segment header | `magic [8], format u32, sequence u64` |
//! | 10 | snapshot header | `magic [8], format u32, revision u64, count u64` |
//! | 11 | snapshot entry | `key_len u32, key, value_len u32, value, create u64, mod u64, version u64` |
//! | 12 | snapshot footer | `count u64` |

use std::io::{self, Read};

use bytes::Bytes;
use setpoint_core::Revision;

use crate::error::{Result, StoreError};

/// Bytes before a frame's body.
pub(super) const FRAME_HEADER: usize = 8;
/// No frame body is larger than this (a batch of maximal values stays far below it).
pub(super) const MAX_FRAME_BODY: usize = 1 << 30;

pub(super) const SEGMENT_MAGIC: [u8; 8] = *b"SPWAL\0\0\x01";
pub(super) const SNAPSHOT_MAGIC: [u8; 8] = *b"SPSNAP\0\x01";
pub(super) const FORMAT: u32 = 1;

const TAG_BATCH: u8 = 1;
const TAG_COMPACT: u8 = 2;
const TAG_SEGMENT_HEADER: u8 = 3;
const TAG_SNAPSHOT_HEADER: u8 = 10;
const TAG_SNAPSHOT_ENTRY: u8 = 11;
const TAG_SNAPSHOT_FOOTER: u8 = 12;

const WRITE_PUT: u8 = 1;
const WRITE_DELETE: u8 = 2;

/// One resolved write as the log records it: preconditions were checked before logging, so
/// replaying it needs only the key and the new value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LoggedWrite {
    /// Create or update the key with this value.
    Put { key: Bytes, value: Bytes },
    /// Delete the key.
    Delete { key: Bytes },
}

/// A decoded log record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LogRecord {
    /// Writes at consecutive revisions starting at `first`.
    Batch {
        first: Revision,
        writes: Vec<LoggedWrite>,
    },
    /// History up to `revision` was compacted.
    Compact { revision: Revision },
    /// The first frame of every segment.
    SegmentHeader { sequence: u64 },
}

/// A decoded snapshot record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SnapshotRecord {
    Header { revision: Revision, count: u64 },
    Entry(SnapshotEntry),
    Footer { count: u64 },
}

/// One key of a snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct SnapshotEntry {
    pub(super) key: Bytes,
    pub(super) value: Bytes,
    pub(super) create: Revision,
    pub(super) modified: Revision,
    pub(super) version: u64,
}

/// Builds frames into a reusable buffer.
#[derive(Default)]
pub(super) struct FrameWriter {
    buf: Vec<u8>,
    /// Where the body of the frame being built starts.
    body_start: Option<usize>,
}

impl FrameWriter {
    /// The encoded frames so far.
    pub(super) fn bytes(&self) -> &[u8] {
        debug_assert!(self.body_start.is_none(), "a frame is still open");
        &self.buf
    }

    pub(super) fn clear(&mut self) {
        self.buf.clear();
        self.body_start = None;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn open(&mut self, tag: u8) {
        debug_assert!(self.body_start.is_none(), "a frame is already open");
        self.buf.extend_from_slice(&[0; FRAME_HEADER]);
        self.body_start = Some(self.buf.len());
        self.buf.push(tag);
    }

    fn close(&mut self) {
        let start = self.body_start.take().expect("close without open");
        let len = u32::try_from(self.buf.len() - start).expect("frame body over 4 GiB");
        let crc = crc32c::crc32c(&self.buf[start..]);
        self.buf[start - 8..start - 4].copy_from_slice(&len.to_le_bytes());
        self.buf[start - 4..start].copy_from_slice(&crc.to_le_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn blob(&mut self, b: &[u8]) {
        self.u32(u32::try_from(b.len()).expect("blob over 4 GiB"));
        self.buf.extend_from_slice(b);
    }

    /// Opens a batch frame; add writes with [`FrameWriter::batch_write`], then
    /// [`FrameWriter::end_batch`] with the number added.
    pub(super) fn begin_batch(&mut self, first: Revision) -> usize {
        self.open(TAG_BATCH);
        self.u64(first.get());
        let count_at = self.buf.len();
        self.u32(0);
        count_at
    }

    pub(super) fn batch_write(&mut self, write: &LoggedWrite) {
        match write {
            LoggedWrite::Put { key, value } => {
                self.buf.push(WRITE_PUT);
                self.blob(key);
                self.blob(value);
            }
            LoggedWrite::Delete { key } => {
                self.buf.push(WRITE_DELETE);
                self.blob(key);
            }
        }
    }

    pub(super) fn end_batch(&mut self, count_at: usize, count: u32) {
        self.buf[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
        self.close();
    }

    pub(super) fn compact(&mut self, revision: Revision) {
        self.open(TAG_COMPACT);
        self.u64(revision.get());
        self.close();
    }

    pub(super) fn segment_header(&mut self, sequence: u64) {
        self.open(TAG_SEGMENT_HEADER);
        self.buf.extend_from_slice(&SEGMENT_MAGIC);
        self.u32(FORMAT);
        self.u64(sequence);
        self.close();
    }

    pub(super) fn snapshot_header(&mut self, revision: Revision, count: u64) {
        self.open(TAG_SNAPSHOT_HEADER);
        self.buf.extend_from_slice(&SNAPSHOT_MAGIC);
        self.u32(FORMAT);
        self.u64(revision.get());
        self.u64(count);
        self.close();
    }

    pub(super) fn snapshot_entry(&mut self, e: &SnapshotEntry) {
        self.open(TAG_SNAPSHOT_ENTRY);
        self.blob(&e.key);
        self.blob(&e.value);
        self.u64(e.create.get());
        self.u64(e.modified.get());
        self.u64(e.version);
        self.close();
    }

    pub(super) fn snapshot_footer(&mut self, count: u64) {
        self.open(TAG_SNAPSHOT_FOOTER);
        self.u64(count);
        self.close();
    }
}

/// Why a frame could not be read.
#[derive(Debug)]
pub(super) enum FrameError {
    /// The input ended inside the frame (`needed` more bytes than were there).
    Truncated,
    /// The frame is complete but its checksum does not match (or its length is impossible);
    /// it declared a body of `len` bytes.
    Checksum { len: usize },
    /// Reading failed.
    Io(io::Error),
}

/// Reads one frame body from `r`. `Ok(None)` at a clean end of input.
pub(super) fn read_frame(r: &mut impl Read) -> Result<Option<Bytes>, FrameError> {
    let mut header = [0u8; FRAME_HEADER];
    let mut got = 0;
    while got < FRAME_HEADER {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if len == 0 || len > MAX_FRAME_BODY {
        return Err(FrameError::Checksum { len });
    }
    // Exactly `len` bytes: the values recovered from this frame are slices of it and live as
    // long as their keys do, so no spare capacity may come with it (growing a vector as it is
    // read would leave up to as much again unused).
    // (A torn header may declare a length far beyond the input: the first allocation is
    // bounded, and whatever it grew to is trimmed.)
    let mut body = Vec::with_capacity(len.min(64 << 20));
    let read = r
        .take(len as u64)
        .read_to_end(&mut body)
        .map_err(FrameError::Io)?;
    if read < len {
        return Err(FrameError::Truncated);
    }
    body.shrink_to_fit();
    if crc32c::crc32c(&body) != crc {
        return Err(FrameError::Checksum { len });
    }
    Ok(Some(Bytes::from(body)))
}

/// A cursor over a frame body that fails with `Corrupt` instead of panicking.
struct Body {
    data: Bytes,
    pos: usize,
}

impl Body {
    fn take(&mut self, n: usize) -> Result<Bytes> {
        if self.data.len() - self.pos < n {
            return Err(malformed("record shorter than its fields"));
        }
        let b = self.data.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?[..].try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?[..].try_into().expect("8 bytes"),
        ))
    }
    fn blob(&mut self) -> Result<Bytes> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn magic(&mut self, want: &[u8; 8]) -> Result<()> {
        if &self.take(8)?[..] != want {
            return Err(malformed("bad magic number"));
        }
        let format = self.u32()?;
        if format != FORMAT {
            return Err(StoreError::Corrupt(format!(
                "unsupported format version {format} (this build reads {FORMAT})"
            )));
        }
        Ok(())
    }
    fn finish<T>(self, value: T) -> Result<T> {
        if self.pos != self.data.len() {
            return Err(malformed("trailing bytes in record"));
        }
        Ok(value)
    }
}

fn malformed(what: &str) -> StoreError {
    StoreError::Corrupt(format!("malformed record: {what}"))
}

/// Decodes a log record from a verified frame body.
pub(super) fn decode_log(data: Bytes) -> Result<LogRecord> {
    let mut b = Body { data, pos: 0 };
    match b.u8()? {
        TAG_BATCH => {
            let first = Revision(b.u64()?);
            let count = b.u32()?;
            let mut writes = Vec::with_capacity(count.min(1 << 16) as usize);
            for _ in 0..count {
                let kind = b.u8()?;
                let key = b.blob()?;
                writes.push(match kind {
                    WRITE_PUT => LoggedWrite::Put {
                        key,
                        value: b.blob()?,
                    },
                    WRITE_DELETE => LoggedWrite::Delete { key },
                    other => return Err(malformed(&format!("unknown write kind {other}"))),
                });
            }
            b.finish(LogRecord::Batch { first, writes })
        }
        TAG_COMPACT => {
            let revision = Revision(b.u64()?);
            b.finish(LogRecord::Compact { revision })
        }
        TAG_SEGMENT_HEADER => {
            b.magic(&SEGMENT_MAGIC)?;
            let sequence = b.u64()?;
            b.finish(LogRecord::SegmentHeader { sequence })
        }
        other => Err(malformed(&format!("unknown log record tag {other}"))),
    }
}

/// Decodes a snapshot record from a verified frame body.
pub(super) fn decode_snapshot(data: Bytes) -> Result<SnapshotRecord> {
    let mut b = Body { data, pos: 0 };
    match b.u8()? {
        TAG_SNAPSHOT_HEADER => {
            b.magic(&SNAPSHOT_MAGIC)?;
            let revision = Revision(b.u64()?);
            let count = b.u64()?;
            b.finish(SnapshotRecord::Header { revision, count })
        }
        TAG_SNAPSHOT_ENTRY => {
            let key = b.blob()?;
            let value = b.blob()?;
            let entry = SnapshotEntry {
                key,
                value,
                create: Revision(b.u64()?),
                modified: Revision(b.u64()?),
                version: b.u64()?,
            };
            b.finish(SnapshotRecord::Entry(entry))
        }
        TAG_SNAPSHOT_FOOTER => {
            let count = b.u64()?;
            b.finish(SnapshotRecord::Footer { count })
        }
        other => Err(malformed(&format!("unknown snapshot record tag {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(w: &FrameWriter) -> Vec<Bytes> {
        let mut r = w.bytes();
        let mut out = Vec::new();
        while let Some(f) = read_frame(&mut r).unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn log_records_should_round_trip() {
        let mut w = FrameWriter::default();
        w.segment_header(7);
        let at = w.begin_batch(Revision(42));
        let writes = vec![
            LoggedWrite::Put {
                key: Bytes::from_static(b"/a"),
                value: Bytes::from_static(b"v"),
            },
            LoggedWrite::Delete {
                key: Bytes::from_static(b"/b"),
            },
        ];
        for write in &writes {
            w.batch_write(write);
        }
        w.end_batch(at, 2);
        w.compact(Revision(40));
        let decoded: Vec<_> = frames(&w)
            .into_iter()
            .map(|f| decode_log(f).unwrap())
            .collect();
        assert_eq!(
            decoded,
            vec![
                LogRecord::SegmentHeader { sequence: 7 },
                LogRecord::Batch {
                    first: Revision(42),
                    writes
                },
                LogRecord::Compact {
                    revision: Revision(40)
                },
            ]
        );
    }

    #[test]
    fn snapshot_records_should_round_trip() {
        let mut w = FrameWriter::default();
        w.snapshot_header(Revision(9), 1);
        let entry = SnapshotEntry {
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(b"value"),
            create: Revision(3),
            modified: Revision(9),
            version: 4,
        };
        w.snapshot_entry(&entry);
        w.snapshot_footer(1);
        let decoded: Vec<_> = frames(&w)
            .into_iter()
            .map(|f| decode_snapshot(f).unwrap())
            .collect();
        assert_eq!(decoded[1], SnapshotRecord::Entry(entry));
        assert_eq!(decoded[2], SnapshotRecord::Footer { count: 1 });
    }

    #[test]
    fn read_frame_should_reject_every_single_bit_flip() {
        let mut w = FrameWriter::default();
        w.compact(Revision(1234));
        let good = w.bytes().to_vec();
        for i in 0..good.len() * 8 {
            let mut bad = good.clone();
            bad[i / 8] ^= 1 << (i % 8);
            let result = read_frame(&mut &bad[..]);
            assert!(
                !matches!(result, Ok(Some(ref b)) if decode_log(b.clone()).is_ok()),
                "bit {i} flipped went unnoticed"
            );
        }
    }

    #[test]
    fn read_frame_should_report_a_cut_frame_as_truncated() {
        let mut w = FrameWriter::default();
        w.compact(Revision(5));
        let bytes = w.bytes();
        for cut in 1..bytes.len() {
            assert!(matches!(
                read_frame(&mut &bytes[..cut]),
                Err(FrameError::Truncated)
            ));
        }
    }

    #[test]
    fn decode_should_reject_malformed_bodies_without_panicking() {
        for body in [
            &b"\x01\x00"[..],
            b"\x02",
            b"\x63",
            b"\x01\0\0\0\0\0\0\0\0\x05\0\0\0",
        ] {
            assert!(decode_log(Bytes::copy_from_slice(body)).is_err());
        }
    }
}
