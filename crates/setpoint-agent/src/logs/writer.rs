//! Writes a container run's output into its log file, line by line, in the container
//! runtimes' log format (see [`crate::logs`]).
//!
//! Promises: every byte the container wrote is in the file, in the order written per stream;
//! a line of output becomes one `F` record, stamped when its end arrived; a line longer than
//! [`MAX_RECORD`] is cut into `P` records of at most that many bytes; an unterminated line is
//! held until its end comes, it grows past [`MAX_RECORD`], or [`LogWriter::finish`], which
//! writes it as a `P` record. Records from the two streams never interleave within a line of
//! the file. The writer is synchronous (the shim has no runtime): share it between the two
//! pump threads behind a mutex.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use chrono::Utc;

use super::record::{encode, format_time, Tag};

/// The longest text of one record (the kubelet's limit too): longer lines are split.
pub(crate) const MAX_RECORD: usize = 16 * 1024;

/// Which output of the container a record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LogStream {
    /// Its standard output.
    Stdout,
    /// Its standard error.
    Stderr,
}

impl LogStream {
    /// `stdout` or `stderr`, as records name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        }
    }
}

/// The log of one container run, open for appending.
#[derive(Debug)]
pub(crate) struct LogWriter {
    file: File,
    /// Output of each stream (`[stdout, stderr]`) received after its last newline; never
    /// holds a newline and never more than [`MAX_RECORD`] bytes between calls.
    pending: [Vec<u8>; 2],
}

impl LogWriter {
    /// Opens `path` for appending, creating it and its directories if needed.
    pub(crate) fn create(path: &Path) -> io::Result<LogWriter> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // Private to the agent's user, as kubelet keeps container logs from other users.
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(crate::process::PRIVATE_FILE_MODE)
            .open(path)?;
        Ok(LogWriter {
            file,
            pending: [Vec::new(), Vec::new()],
        })
    }

    /// Records `chunk`, output of `stream`: complete lines (and over-long pieces) are written
    /// at once, the rest is held.
    pub(crate) fn write(&mut self, stream: LogStream, chunk: &[u8]) -> io::Result<()> {
        let time = format_time(Utc::now());
        let pending = &mut self.pending[index(stream)];
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            let (line, after) = rest.split_at(end);
            pending.extend_from_slice(line);
            emit_line(&mut out, &time, stream, pending);
            rest = &after[1..];
        }
        pending.extend_from_slice(rest);
        while pending.len() > MAX_RECORD {
            encode(
                &mut out,
                &time,
                stream,
                Tag::Partial,
                &pending[..MAX_RECORD],
            );
            pending.drain(..MAX_RECORD);
        }
        self.write_out(&out)
    }

    /// Writes what is held of unterminated lines, as `P` records, and syncs the file. Call it
    /// once the container's output is closed; more output after it starts new lines.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let time = format_time(Utc::now());
        let mut out = Vec::new();
        for stream in [LogStream::Stdout, LogStream::Stderr] {
            let pending = &mut self.pending[index(stream)];
            if !pending.is_empty() {
                encode(&mut out, &time, stream, Tag::Partial, pending);
                pending.clear();
            }
        }
        self.write_out(&out)?;
        self.file.sync_data()
    }

    fn write_out(&mut self, out: &[u8]) -> io::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.file.write_all(out)
    }
}

/// Emits the line held in `pending` (its newline just arrived): `P` pieces while it is longer
/// than a record, then the `F` record; empties `pending`.
fn emit_line(out: &mut Vec<u8>, time: &str, stream: LogStream, pending: &mut Vec<u8>) {
    let mut line = pending.as_slice();
    while line.len() > MAX_RECORD {
        encode(out, time, stream, Tag::Partial, &line[..MAX_RECORD]);
        line = &line[MAX_RECORD..];
    }
    encode(out, time, stream, Tag::Full, line);
    pending.clear();
}

fn index(stream: LogStream) -> usize {
    match stream {
        LogStream::Stdout => 0,
        LogStream::Stderr => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::parse;
    use super::*;

    fn records(path: &Path) -> Vec<(LogStream, Tag, Vec<u8>)> {
        let text = std::fs::read(path).expect("the log");
        text.split_inclusive(|b| *b == b'\n')
            .map(|line| {
                assert!(line.ends_with(b"\n"), "every record ends with a newline");
                let r = parse(line).expect("a record");
                (r.stream, r.tag, r.text.to_vec())
            })
            .collect()
    }

    #[test]
    fn writer_should_write_one_full_record_per_line_and_hold_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("logs/c/0.log");
        let mut w = LogWriter::create(&path).expect("create");
        w.write(LogStream::Stdout, b"one\ntw").expect("write");
        w.write(LogStream::Stderr, b"oops\n").expect("write");
        w.write(LogStream::Stdout, b"o\n\nthr").expect("write");
        assert_eq!(
            records(&path),
            vec![
                (LogStream::Stdout, Tag::Full, b"one".to_vec()),
                (LogStream::Stderr, Tag::Full, b"oops".to_vec()),
                (LogStream::Stdout, Tag::Full, b"two".to_vec()),
                (LogStream::Stdout, Tag::Full, b"".to_vec()),
            ]
        );
        w.finish().expect("finish");
        assert_eq!(
            records(&path).last(),
            Some(&(LogStream::Stdout, Tag::Partial, b"thr".to_vec()))
        );
    }

    #[test]
    fn writer_should_split_long_lines_into_partial_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("0.log");
        let mut w = LogWriter::create(&path).expect("create");
        let long = vec![b'x'; MAX_RECORD * 2 + 10];
        w.write(LogStream::Stdout, &long).expect("write");
        // Two full-size pieces are out; 10 bytes wait for the end of the line.
        let so_far = records(&path);
        assert_eq!(so_far.len(), 2);
        assert!(so_far
            .iter()
            .all(|(_, tag, text)| *tag == Tag::Partial && text.len() == MAX_RECORD));
        w.write(LogStream::Stdout, b"yz\n").expect("write");
        let all = records(&path);
        assert_eq!(all.len(), 3);
        assert_eq!(
            all[2],
            (LogStream::Stdout, Tag::Full, b"xxxxxxxxxxyz".to_vec())
        );
    }

    #[test]
    fn writer_should_append_to_an_existing_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("0.log");
        LogWriter::create(&path)
            .expect("create")
            .write(LogStream::Stdout, b"a\n")
            .expect("write");
        LogWriter::create(&path)
            .expect("create")
            .write(LogStream::Stdout, b"b\n")
            .expect("write");
        let texts: Vec<_> = records(&path).into_iter().map(|r| r.2).collect();
        assert_eq!(texts, vec![b"a".to_vec(), b"b".to_vec()]);
    }
}
