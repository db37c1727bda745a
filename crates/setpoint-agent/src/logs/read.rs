//! Serves a container's log as `kubectl logs` shows it: the raw text of the chosen run, after
//! the tail / since / limit options, optionally followed until the run ends.
//!
//! Follow ends when the run's exit record exists and the log has been read to its end after
//! that (the shim writes the exit record only after the log is complete), when a newer run
//! has started (again after draining), or when the reader goes away.

use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::fs::File;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio::sync::mpsc;

pub(crate) use super::options::LogOptions;
use super::options::{RunChoice, Timestamps};
use super::record::{parse, Tag};
use super::{container_log, container_log_dir, exit_record};

/// How often a followed log is checked for more output.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// The read size, and about the largest chunk sent.
const CHUNK: usize = 64 * 1024;

/// Why a log cannot be served. The server maps each to a Kubernetes `Status`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LogError {
    /// The container has no log yet.
    #[error("container {container:?} in pod {pod:?} is waiting to start: ContainerCreating")]
    WaitingToStart { container: String, pod: String },
    /// `previous` was asked for and there is no earlier run.
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious { container: String, pod: String },
    /// An option's value is not of its type (not a number, not a time).
    #[error("{0}")]
    BadOption(String),
    /// An option's value is out of its range, or options contradict each other.
    #[error("{0}")]
    InvalidOption(String),
    /// Reading the log failed.
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The log's text as it is read: chunks of bytes, ending after the last one (or an error).
/// Dropping it stops the reading.
#[derive(Debug)]
pub(crate) struct LogStreamBody {
    chunks: mpsc::Receiver<io::Result<Bytes>>,
}

impl futures::Stream for LogStreamBody {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.chunks.poll_recv(cx)
    }
}

/// Opens the log of `container` of the pod whose directory is `pod_dir` (`pod` names it in
/// errors) and starts streaming it as `options` say. Must be called within a Tokio runtime.
pub(crate) async fn read_logs(
    pod_dir: &Path,
    pod: &str,
    container: &str,
    options: LogOptions,
) -> Result<LogStreamBody, LogError> {
    let runs = log_runs(&container_log_dir(pod_dir, container)).await;
    let Some(&current) = runs.last() else {
        return Err(LogError::WaitingToStart {
            container: container.to_owned(),
            pod: pod.to_owned(),
        });
    };
    let run = match options.run {
        RunChoice::Current => current,
        RunChoice::Previous => match runs.len().checked_sub(2).map(|i| runs[i]) {
            Some(run) => run,
            None => {
                return Err(LogError::NoPrevious {
                    container: container.to_owned(),
                    pod: pod.to_owned(),
                })
            }
        },
    };
    let path = container_log(pod_dir, container, run);
    let io_error = |source| LogError::Io {
        path: path.clone(),
        source,
    };
    let mut file = File::open(&path).await.map_err(io_error)?;
    let start = match options.tail_lines {
        Some(n) => tail_start(&mut file, n).await.map_err(io_error)?,
        None => 0,
    };
    file.seek(SeekFrom::Start(start)).await.map_err(io_error)?;
    let (tx, chunks) = mpsc::channel(4);
    let reader = Reader {
        file,
        options,
        exit: exit_record(pod_dir, container, run),
        newer_runs_dir: container_log_dir(pod_dir, container),
        run,
        sent: 0,
        tx,
    };
    tokio::spawn(reader.run());
    Ok(LogStreamBody { chunks })
}

/// The run numbers of the `<n>.log` files in `dir`, ascending.
async fn log_runs(dir: &Path) -> Vec<u32> {
    let mut runs = Vec::new();
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return runs;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        runs.push(n);
    }
    runs.sort_unstable();
    runs
}

/// The offset where the last `n` complete lines of `file` start (an unterminated last line
/// is not counted).
async fn tail_start(file: &mut File, n: u64) -> io::Result<u64> {
    let len = file.seek(SeekFrom::End(0)).await?;
    let mut end = len;
    let mut newlines = 0u64;
    let mut buf = vec![0u8; CHUNK];
    while end > 0 {
        let start = end.saturating_sub(CHUNK as u64);
        let size = (end - start) as usize;
        file.seek(SeekFrom::Start(start)).await?;
        file.read_exact(&mut buf[..size]).await?;
        for (i, b) in buf[..size].iter().enumerate().rev() {
            if *b == b'\n' {
                newlines += 1;
                if newlines == n.saturating_add(1) {
                    return Ok(start + i as u64 + 1);
                }
            }
        }
        end = start;
    }
    Ok(0)
}

/// Whether the reader should keep waiting at the end of the log.
#[derive(Debug, PartialEq, Eq)]
enum AtEnd {
    /// Not following: done.
    Stop,
    /// The run is over (or superseded); read what is left, then stop.
    DrainThenStop,
    /// More may come.
    Wait,
}

struct Reader {
    file: File,
    options: LogOptions,
    /// The run's exit record.
    exit: PathBuf,
    /// Where a newer run's log would appear.
    newer_runs_dir: PathBuf,
    run: u32,
    /// Bytes sent so far (for `limitBytes`).
    sent: u64,
    tx: mpsc::Sender<io::Result<Bytes>>,
}

impl Reader {
    async fn run(mut self) {
        if let Err(e) = self.copy().await {
            let _ = self.tx.send(Err(e)).await;
        }
    }

    /// Copies complete records from the file to the channel. Ends at the end of the file (not
    /// following), when the run is over and drained, at the byte limit, or when the receiver
    /// is gone.
    async fn copy(&mut self) -> io::Result<()> {
        // Bytes read that do not yet make a complete line.
        let mut pending: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        let mut draining = false;
        loop {
            let n = self.file.read(&mut buf).await?;
            if n > 0 {
                pending.extend_from_slice(&buf[..n]);
                let complete = pending
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                let out = self.render(&pending[..complete]);
                pending.drain(..complete);
                if !self.send(out).await {
                    return Ok(());
                }
                continue;
            }
            if draining {
                return Ok(());
            }
            match self.at_end().await {
                AtEnd::Stop => return Ok(()),
                // One more pass to the end: the exit record (or the newer run) was seen after
                // everything of this run was written.
                AtEnd::DrainThenStop => draining = true,
                AtEnd::Wait => {
                    tokio::select! {
                        _ = tokio::time::sleep(FOLLOW_POLL) => {}
                        _ = self.tx.closed() => return Ok(()),
                    }
                }
            }
        }
    }

    async fn at_end(&self) -> AtEnd {
        if !self.options.follow {
            return AtEnd::Stop;
        }
        if tokio::fs::try_exists(&self.exit).await.unwrap_or(false)
            || log_runs(&self.newer_runs_dir)
                .await
                .last()
                .is_some_and(|n| *n > self.run)
        {
            return AtEnd::DrainThenStop;
        }
        AtEnd::Wait
    }

    /// The output for complete `lines` of the file.
    fn render(&self, lines: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(lines.len());
        for line in lines.split_inclusive(|b| *b == b'\n') {
            let Some(record) = parse(line) else {
                tracing::debug!("skipping a malformed log record");
                continue;
            };
            if self.options.since.is_some_and(|since| record.time < since) {
                continue;
            }
            if self.options.timestamps == Timestamps::Show {
                out.extend_from_slice(record.time_text);
                out.push(b' ');
            }
            out.extend_from_slice(record.text);
            if record.tag == Tag::Full {
                out.push(b'\n');
            }
        }
        out
    }

    /// Sends `out` (cut at the byte limit); false when the reading should stop.
    async fn send(&mut self, mut out: Vec<u8>) -> bool {
        let mut limit_reached = false;
        if let Some(limit) = self.options.limit_bytes {
            let left = limit.saturating_sub(self.sent);
            if out.len() as u64 >= left {
                out.truncate(left as usize);
                limit_reached = true;
            }
        }
        if !out.is_empty() {
            self.sent += out.len() as u64;
            if self.tx.send(Ok(Bytes::from(out))).await.is_err() {
                return false;
            }
        }
        !limit_reached
    }
}
