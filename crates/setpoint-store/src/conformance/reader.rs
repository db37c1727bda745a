//! [`WatchReader`]: reads a watch stream for a test, checking every batch against the watch
//! contract as it arrives and failing (panicking) on a timeout instead of hanging.
//!
//! Its async methods are cancel-safe: a batch is recorded as soon as it is read, so a read cut
//! short (by a `select!` or a timeout) loses nothing.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, StreamExt};

use super::WAIT;
use crate::{Event, EventKind, Revision, Store, StoreError, WatchBatch, WatchStream};

/// A watch under test. Every batch read is checked: events under the prefix, strictly after what
/// was delivered before, in revision order, each consistent with its `prev`; progress covering
/// the batch's events and moving forward with every batch (a watch must not repeat itself).
pub struct WatchReader {
    /// `None` once the stream has ended or failed.
    stream: Option<WatchStream>,
    prefix: Bytes,
    /// The revision after which the watch was opened.
    after: Revision,
    /// The latest `progress` received (`after` before the first batch).
    progress: Revision,
    /// The revision of the latest event received (`after` before the first).
    last_event: Revision,
    /// Events received but not yet handed out, all after those handed out.
    pending: VecDeque<Event>,
    /// Says in panic messages which test, seed or step this watch belongs to.
    context: String,
}

impl WatchReader {
    /// Opens a watch on `store`; panics if the store refuses it.
    pub async fn open<S: Store + ?Sized>(
        store: &S,
        prefix: impl Into<Bytes>,
        after: Revision,
    ) -> Self {
        let prefix = prefix.into();
        let stream = store
            .watch(prefix.clone(), after)
            .await
            .unwrap_or_else(|e| panic!("watch of {prefix:?} after {after} refused: {e}"));
        WatchReader::new(stream, prefix, after)
    }

    /// Reads `stream`, a watch of `prefix` opened after revision `after`.
    pub fn new(stream: WatchStream, prefix: Bytes, after: Revision) -> Self {
        WatchReader {
            stream: Some(stream),
            prefix,
            after,
            progress: after,
            last_event: after,
            pending: VecDeque::new(),
            context: String::new(),
        }
    }

    /// Sets what panic messages say this watch belongs to (a case, a seed and step).
    pub fn set_context(&mut self, context: impl Into<String>) {
        self.context = context.into();
    }

    /// The latest progress the watch reported.
    pub fn progress(&self) -> Revision {
        self.progress
    }

    /// The next item of the stream, checked; `None` when it has ended. Panics after [`WAIT`].
    pub async fn next_item(&mut self) -> Option<crate::Result<WatchBatch>> {
        let stream = self.stream.as_mut()?;
        let item = match tokio::time::timeout(WAIT, stream.next()).await {
            Ok(item) => item,
            Err(_) => panic!(
                "{}watch of {:?} after {}: nothing within {WAIT:?} (progress {}, last event {})",
                self.context_prefix(),
                self.prefix,
                self.after,
                self.progress,
                self.last_event
            ),
        };
        match &item {
            Some(Ok(batch)) => self.check_batch(batch),
            Some(Err(_)) | None => self.stream = None,
        }
        item
    }

    /// The events up to and including `revision`: reads until an event at or after it, or
    /// progress reaching it. Events after `revision` stay pending for the next call. Returns the
    /// error instead if the watch fails first, with the events received before it; panics if it
    /// ends cleanly first.
    pub async fn try_read_until(
        &mut self,
        revision: Revision,
    ) -> Result<Vec<Event>, (Vec<Event>, StoreError)> {
        while self.progress < revision && self.last_event < revision {
            match self.next_item().await {
                Some(Ok(batch)) => self.pending.extend(batch.events),
                Some(Err(error)) => return Err((self.pending.drain(..).collect(), error)),
                None => panic!(
                    "{}watch of {:?} after {} ended before revision {revision} (progress {})",
                    self.context_prefix(),
                    self.prefix,
                    self.after,
                    self.progress
                ),
            }
        }
        let ready = self
            .pending
            .iter()
            .take_while(|e| e.revision() <= revision)
            .count();
        Ok(self.pending.drain(..ready).collect())
    }

    /// Like [`WatchReader::try_read_until`], panicking if the watch fails.
    pub async fn read_until(&mut self, revision: Revision) -> Vec<Event> {
        match self.try_read_until(revision).await {
            Ok(events) => events,
            Err((_, error)) => panic!(
                "{}watch of {:?} after {} failed before revision {revision}: {error}",
                self.context_prefix(),
                self.prefix,
                self.after
            ),
        }
    }

    /// Reads, without waiting, every batch the stream has ready; their events become pending.
    /// Panics if the watch fails.
    pub fn read_ready(&mut self) {
        while let Some(stream) = self.stream.as_mut() {
            let Some(item) = stream.next().now_or_never() else {
                return;
            };
            match item {
                Some(Ok(batch)) => {
                    self.check_batch(&batch);
                    self.pending.extend(batch.events);
                }
                Some(Err(error)) => panic!(
                    "{}watch of {:?} after {} failed: {error}",
                    self.context_prefix(),
                    self.prefix,
                    self.after
                ),
                None => self.stream = None,
            }
        }
    }

    /// Events received beyond what was asked for so far.
    pub fn take_pending(&mut self) -> Vec<Event> {
        self.pending.drain(..).collect()
    }

    /// Checks that no event arrives for `duration` (pure progress batches may).
    pub async fn expect_quiet(&mut self, duration: Duration) {
        assert!(
            self.pending.is_empty(),
            "{}unexpected events {:?}",
            self.context_prefix(),
            self.pending
        );
        let deadline = tokio::time::Instant::now() + duration;
        while let Some(stream) = self.stream.as_mut() {
            let Ok(item) = tokio::time::timeout_at(deadline, stream.next()).await else {
                return;
            };
            match item {
                Some(Ok(batch)) => {
                    self.check_batch(&batch);
                    assert!(
                        batch.events.is_empty(),
                        "{}unexpected events {:?}",
                        self.context_prefix(),
                        batch.events
                    );
                }
                other => panic!(
                    "{}watch should have stayed open, got {other:?}",
                    self.context_prefix()
                ),
            }
        }
    }

    /// Checks that the stream ends (after an error it must).
    pub async fn expect_end(&mut self) {
        if let Some(item) = self.next_item().await {
            panic!(
                "{}watch should have ended, got {item:?}",
                self.context_prefix()
            );
        }
    }

    fn context_prefix(&self) -> String {
        if self.context.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.context)
        }
    }

    /// Checks a batch against the watch contract and records its progress.
    fn check_batch(&mut self, batch: &WatchBatch) {
        let context = self.context_prefix();
        assert!(
            batch.progress > self.progress,
            "{context}watch of {:?}: batch progress {} does not pass the previous {} (batch {batch:?})",
            self.prefix,
            batch.progress,
            self.progress
        );
        for event in &batch.events {
            assert!(
                event.kv.key.starts_with(&self.prefix),
                "{context}watch of {:?} delivered an event outside it: {event:?}",
                self.prefix
            );
            assert!(
                event.revision() > self.last_event && event.revision() > self.progress,
                "{context}watch of {:?}: event at {} after progress {} and event {} (duplicate or out of order): {event:?}",
                self.prefix,
                event.revision(),
                self.progress,
                self.last_event
            );
            assert!(
                event.revision() <= batch.progress,
                "{context}watch of {:?}: event at {} beyond its batch's progress {}",
                self.prefix,
                event.revision(),
                batch.progress
            );
            check_event(event).unwrap_or_else(|problem| panic!("{context}{problem}: {event:?}"));
            self.last_event = event.revision();
        }
        self.progress = batch.progress;
    }
}

/// Checks that an event is consistent with itself and its `prev`.
fn check_event(event: &Event) -> Result<(), &'static str> {
    let kv = &event.kv;
    let check = |ok: bool, problem| if ok { Ok(()) } else { Err(problem) };
    if let Some(prev) = &event.prev {
        check(prev.key == kv.key, "prev is of another key")?;
        check(
            prev.mod_revision < kv.mod_revision,
            "prev is not older than the event",
        )?;
        check(
            prev.create_revision == kv.create_revision,
            "create revision changed without a create",
        )?;
    }
    match (event.kind, &event.prev) {
        (EventKind::Put, None) => {
            check(
                kv.create_revision == kv.mod_revision,
                "a create's create and mod revisions differ",
            )?;
            check(kv.version == 1, "a create's version is not 1")
        }
        (EventKind::Put, Some(prev)) => check(
            kv.version == prev.version + 1,
            "an update's version is not prev's + 1",
        ),
        (EventKind::Delete, Some(prev)) => {
            check(kv.value.is_empty(), "a delete's value is not empty")?;
            check(
                kv.version == prev.version,
                "a delete's version is not the deleted one's",
            )
        }
        (EventKind::Delete, None) => Err("a delete without the deleted value"),
    }
}
