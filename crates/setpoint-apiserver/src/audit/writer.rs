//! Writing events without ever making a request wait: each event goes into a bounded queue
//! ([`QUEUE_CAPACITY`] events) that a dedicated thread empties in batches, serializing each
//! event as a JSON line, appending the batch to the log and flushing it once. Woken by an event,
//! the thread lets [`BATCH_WAIT`] pass before it takes the batch: while it sleeps, queuing an
//! event is a plain memory write, where waking the thread for each one cost a futex wake, a
//! context switch and a `write(2)` per event — most of the audit log's cost per request. This is
//! kube-apiserver's "batch" mode, not its default "blocking" one: when the queue is full
//! (the disk cannot keep up) an event is dropped, counted in `apiserver_audit_error_total`
//! and logged (at most once a minute) — a request is never slowed or refused for the audit
//! log's sake.

use std::io::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::event::{Event, Level};
use super::rotate::{RotatingFile, Rotation};

/// How many events may wait for the writer thread.
pub(crate) const QUEUE_CAPACITY: usize = 10_000;
/// The most events written between two flushes.
const BATCH: usize = 1_000;
/// How long the writer lets events gather after the first of a batch arrives: how late, at
/// most, an event reaches the file (plus the write itself).
const BATCH_WAIT: Duration = Duration::from_millis(5);
/// How often, at most, a dropped or unwritable event is logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Where the lines go.
pub(crate) enum Sink {
    /// A rotated file.
    File(RotatingFile),
    /// The process's standard output.
    Stdout,
}

/// What the audit log has counted, for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Events produced (`apiserver_audit_event_total`).
    pub(crate) events: AtomicU64,
    /// Events dropped or not written (`apiserver_audit_error_total`).
    pub(crate) errors: AtomicU64,
    /// Requests by the level the policy gave them (`apiserver_audit_level_total`).
    pub(crate) levels: [AtomicU64; 4],
    /// When an error was last logged.
    last_warning: Mutex<Option<Instant>>,
}

impl Counters {
    /// Counts one request at `level`.
    pub(crate) fn level(&self, level: Level) {
        let i = match level {
            Level::None => 0,
            Level::Metadata => 1,
            Level::Request => 2,
            Level::RequestResponse => 3,
        };
        self.levels[i].fetch_add(1, Ordering::Relaxed);
    }

    fn error(&self, what: &str, detail: &dyn std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut last = self.last_warning.lock();
        if last.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
            *last = Some(now);
            tracing::warn!(%detail, errors = self.errors.load(Ordering::Relaxed), "{what}");
        }
    }
}

/// The sending side: cheap to call from any request.
pub(crate) struct Writer {
    queue: SyncSender<Event>,
    pub(crate) counters: Arc<Counters>,
}

impl Writer {
    /// Starts the writer thread over `sink`.
    pub(crate) fn start(sink: Sink) -> io::Result<Writer> {
        let (queue, events) = mpsc::sync_channel(QUEUE_CAPACITY);
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        std::thread::Builder::new()
            .name("audit-log".to_owned())
            .spawn(move || write_events(&events, sink, &thread_counters))?;
        Ok(Writer { queue, counters })
    }

    /// Queues `event`; drops it (and counts an error) if the queue is full.
    pub(crate) fn send(&self, event: Event) {
        self.counters.events.fetch_add(1, Ordering::Relaxed);
        match self.queue.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.counters.error(
                "audit events dropped: the audit log cannot keep up",
                &"queue full",
            ),
            Err(TrySendError::Disconnected(_)) => self.counters.error(
                "audit events dropped: the audit log writer stopped",
                &"no writer",
            ),
        }
    }
}

/// The writer thread: until every sender is gone, writes what is queued, a batch at a time.
fn write_events(events: &Receiver<Event>, mut sink: Sink, counters: &Counters) {
    let stdout = io::stdout();
    while let Ok(first) = events.recv() {
        std::thread::sleep(BATCH_WAIT);
        let batch = std::iter::once(first).chain(events.try_iter().take(BATCH - 1));
        let mut stdout = stdout.lock();
        for event in batch {
            let line = match event.to_line() {
                Ok(line) => line,
                Err(error) => {
                    counters.error("an audit event could not be serialized", &error);
                    continue;
                }
            };
            let written = match &mut sink {
                Sink::File(file) => file.write(&line),
                Sink::Stdout => stdout.write_all(&line),
            };
            if let Err(error) = written {
                counters.error("cannot write the audit log", &error);
            }
        }
        let flushed = match &mut sink {
            Sink::File(file) => file.flush(),
            Sink::Stdout => stdout.flush(),
        };
        if let Err(error) = flushed {
            counters.error("cannot write the audit log", &error);
        }
    }
}

/// Opens the log at `path` for the writer.
pub(crate) fn file_sink(path: &Path, rotation: Rotation) -> io::Result<Sink> {
    RotatingFile::open(path, rotation).map(Sink::File)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    #[test]
    fn queued_events_should_reach_the_file_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let rotation = Rotation {
            max_size: 0,
            max_age: None,
            max_backups: 0,
        };
        let writer = Writer::start(file_sink(&path, rotation).unwrap()).unwrap();
        for i in 0..5 {
            writer.send(Event::new(Level::Metadata, format!("id-{i}"), Utc::now()));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let lines = loop {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.lines().count() == 5 || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let ids: Vec<String> = lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["auditID"].to_string())
            .collect();
        assert_eq!(
            ids,
            ["\"id-0\"", "\"id-1\"", "\"id-2\"", "\"id-3\"", "\"id-4\""]
        );
        assert_eq!(writer.counters.events.load(Ordering::Relaxed), 5);
        assert_eq!(writer.counters.errors.load(Ordering::Relaxed), 0);
    }
}
