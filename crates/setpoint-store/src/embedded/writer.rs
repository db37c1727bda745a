//! The writer: one thread that owns every change to the store. It takes all the requests that
//! queued while it was busy (group commit), checks each against the state as the earlier ones
//! in the batch left it, logs the successful ones in one frame, syncs once, publishes the new
//! state and wakes watchers, and only then answers — so an acknowledged write is durable and
//! a reader never sees a write that a crash could take back.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use setpoint_core::Revision;
use tokio::sync::oneshot;

use super::codec::FrameWriter;
use super::shared::Shared;
use super::state::{self, check_compact, Index, WriteOp};
use super::wal::Wal;
use crate::error::{Result, StoreError};
use crate::types::Event;

/// A request to the writer.
pub(super) enum Request {
    /// A write, answered with its event.
    Write {
        op: WriteOp,
        reply: oneshot::Sender<Result<Event>>,
    },
    /// A compaction, logged so that it survives a restart.
    Compact {
        revision: Revision,
        reply: oneshot::Sender<Result<()>>,
    },
}

/// The writer thread's state.
pub(super) struct Writer {
    pub(super) requests: Receiver<Request>,
    pub(super) shared: Arc<Shared>,
    /// `None` for a store kept only in memory.
    pub(super) wal: Option<Wal>,
    pub(super) max_batch_ops: usize,
    /// The writer's copy of the index; equal to the published one between batches.
    index: Index,
    /// Set after a failed append: the log's tail is unknown, so no more writes are taken.
    failed: Option<String>,
    frames: FrameWriter,
}

/// How one request of a batch turned out, kept until the batch is durable.
enum Outcome {
    Written(oneshot::Sender<Result<Event>>, Event),
    Compacted(oneshot::Sender<Result<()>>),
    WriteFailed(oneshot::Sender<Result<Event>>, StoreError),
    CompactFailed(oneshot::Sender<Result<()>>, StoreError),
}

impl Writer {
    pub(super) fn new(
        requests: Receiver<Request>,
        shared: Arc<Shared>,
        wal: Option<Wal>,
        max_batch_ops: usize,
    ) -> Writer {
        let index = shared.state.read().index.clone();
        Writer {
            requests,
            shared,
            wal,
            max_batch_ops: max_batch_ops.max(1),
            index,
            failed: None,
            frames: FrameWriter::default(),
        }
    }

    /// Runs until every sender is gone and the queue is drained.
    pub(super) fn run(mut self) {
        let mut batch = Vec::with_capacity(self.max_batch_ops);
        while let Ok(first) = self.requests.recv() {
            batch.push(first);
            while batch.len() < self.max_batch_ops {
                match self.requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.commit(&mut batch);
        }
    }

    fn commit(&mut self, batch: &mut Vec<Request>) {
        if let Some(reason) = &self.failed {
            for request in batch.drain(..) {
                let err = || StoreError::Unavailable(reason.clone());
                match request {
                    Request::Write { reply, .. } => drop(reply.send(Err(err()))),
                    Request::Compact { reply, .. } => drop(reply.send(Err(err()))),
                }
            }
            return;
        }

        let (base_revision, mut compacted) = {
            let state = self.shared.state.read();
            (state.revision, state.compacted)
        };
        let mut revision = base_revision;
        let mut compact_to = None;
        let mut events = Vec::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        self.frames.clear();
        let mut count_at = None;
        for request in batch.drain(..) {
            match request {
                Request::Write { op, reply } => {
                    match state::apply(&mut self.index, revision.next(), &op) {
                        Ok((event, logged)) => {
                            revision = revision.next();
                            if count_at.is_none() {
                                count_at = Some(self.frames.begin_batch(revision));
                            }
                            self.frames.batch_write(&logged);
                            events.push(event.clone());
                            outcomes.push(Outcome::Written(reply, event));
                        }
                        Err(e) => outcomes.push(Outcome::WriteFailed(reply, e)),
                    }
                }
                Request::Compact {
                    revision: target,
                    reply,
                } => match check_compact(target, compacted, revision) {
                    Ok(()) => {
                        compacted = target;
                        compact_to = Some(target);
                        outcomes.push(Outcome::Compacted(reply));
                    }
                    Err(e) => outcomes.push(Outcome::CompactFailed(reply, e)),
                },
            }
        }
        if let Some(at) = count_at {
            self.frames.end_batch(at, events.len() as u32);
        }
        if let Some(target) = compact_to {
            // Logged after the batch, which it may reach into: replay applies both in order.
            self.frames.compact(target);
        }

        if let (Some(wal), false) = (&mut self.wal, self.frames.is_empty()) {
            let last = (revision > base_revision).then_some(revision);
            if let Err(e) = wal.append(self.frames.bytes(), last) {
                self.fail(e, outcomes);
                return;
            }
        }

        let dropped = {
            let mut state = self.shared.state.write();
            state.publish(self.index.clone(), events, Instant::now());
            let dropped = compact_to.map(|c| state.compact(c));
            #[cfg(debug_assertions)]
            state.check_invariants();
            dropped
        };
        drop(dropped); // free compacted history outside the lock
        if revision > base_revision {
            self.shared.notify.send_replace(revision);
        }
        for outcome in outcomes {
            match outcome {
                Outcome::Written(reply, event) => drop(reply.send(Ok(event))),
                Outcome::Compacted(reply) => drop(reply.send(Ok(()))),
                Outcome::WriteFailed(reply, e) => drop(reply.send(Err(e))),
                Outcome::CompactFailed(reply, e) => drop(reply.send(Err(e))),
            }
        }
    }

    /// The log could not be appended: nothing of this batch is published, and the store stops
    /// taking writes (what reached the disk is only known after a restart).
    fn fail(&mut self, error: StoreError, outcomes: Vec<Outcome>) {
        let mut cause = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(s) = source {
            cause = format!("{cause}: {s}");
            source = s.source();
        }
        tracing::error!(error = %cause, "log append failed; the store no longer accepts writes");
        let reason = format!("a write to the log failed ({cause}); restart to recover");
        self.index = self.shared.state.read().index.clone();
        let mut error = Some(error);
        let mut next_err = || {
            error
                .take()
                .unwrap_or_else(|| StoreError::Unavailable(reason.clone()))
        };
        for outcome in outcomes {
            match outcome {
                Outcome::Written(reply, _) => drop(reply.send(Err(next_err()))),
                Outcome::Compacted(reply) => drop(reply.send(Err(next_err()))),
                Outcome::WriteFailed(reply, e) => drop(reply.send(Err(e))),
                Outcome::CompactFailed(reply, e) => drop(reply.send(Err(e))),
            }
        }
        self.failed = Some(reason);
    }
}
