//! Watches on etcd: one etcd watch (its own gRPC stream) per [`Store::watch`], pumped by a task
//! into the returned stream.
//!
//! The etcd watch starts at the etcd revision of `after` itself (one earlier than needed, the
//! event at it is dropped): etcd then refuses exactly the watches our contract refuses, those
//! that need history up to a compacted revision. A count-only read at that revision first makes
//! such a watch fail at once, as the contract wants, instead of on its first read.
//!
//! Progress: a batch of events reports the revision of its last event (etcd may put a higher
//! revision in the header of a catching-up watcher's response, which is not a promise). A
//! response without events is a progress notification and reports its header revision: etcd's
//! periodic notifications (asked for with `progress_notify`) reach only watchers that have
//! caught up, in order with their events; requested ones are asked for every
//! `progress_interval` only on versions that order them likewise (see `EtcdConfig`).
//!
//! [`Store::watch`]: crate::Store::watch

use std::sync::Arc;

use bytes::Bytes;
use etcd_client::{EventType, GetOptions, WatchOptions, WatchResponse};
use setpoint_core::Revision;
use tokio::sync::mpsc;

use super::errors::Failure;
use super::kv::PROBE_KEY;
use super::{from_client_error, key_value, ours, theirs, Inner};
use crate::error::{Result, StoreError};
use crate::store::{prefix_end, WatchStream};
use crate::types::{Event, EventKind, KeyValue, WatchBatch};

/// Batches the pump may hold for a slow reader before it stops reading from etcd.
const BUFFERED_BATCHES: usize = 64;

pub(crate) async fn watch(
    inner: &Arc<Inner>,
    prefix: Bytes,
    after: Revision,
) -> Result<WatchStream> {
    let start = theirs(after)?;
    let probe = GetOptions::new().with_count_only().with_revision(start);
    match inner
        .call(|| {
            let (mut kv, probe) = (inner.kv.clone(), probe.clone());
            async move { kv.get(PROBE_KEY, Some(probe)).await }
        })
        .await
    {
        Ok(_) | Err(Failure::FutureRevision) => {}
        Err(Failure::Compacted) => {
            return Err(StoreError::Compacted {
                requested: after,
                compacted: inner.compacted_revision(start).await?,
            })
        }
        Err(other) => return Err(other.into_store_error()),
    }
    let mut options = match prefix_end(&prefix) {
        Some(end) => WatchOptions::new().with_range(end.to_vec()),
        None => WatchOptions::new().with_from_key(),
    };
    options = options
        .with_start_revision(start)
        .with_prev_key()
        .with_progress_notify();
    let mut stream = inner
        .call(|| {
            let (mut watch, prefix, options) =
                (inner.watch.clone(), prefix.to_vec(), options.clone());
            async move { watch.watch(prefix, Some(options)).await }
        })
        .await
        .map_err(Failure::into_store_error)?;
    let created = inner
        .call_once(stream.message())
        .await
        .map_err(Failure::into_store_error)?
        .ok_or_else(|| StoreError::Unavailable("etcd closed a new watch".into()))?;
    let pump = Pump {
        prefix,
        progress: after,
    };
    if let Some(error) = pump.ending(&created) {
        return Err(error);
    }
    let (sender, mut receiver) = mpsc::channel(BUFFERED_BATCHES);
    let request_progress = inner
        .request_progress
        .then_some(inner.config.progress_interval);
    tokio::spawn(async move { pump.run(stream, sender, request_progress).await });
    Ok(Box::pin(futures::stream::poll_fn(move |cx| {
        receiver.poll_recv(cx)
    })))
}

/// The state of one watch's pump.
struct Pump {
    prefix: Bytes,
    /// Every change up to here has been handed on (`after` before the first batch).
    progress: Revision,
}

impl Pump {
    /// Forwards etcd's responses until the reader goes away, etcd ends the watch or it fails.
    async fn run(
        mut self,
        mut stream: etcd_client::WatchStream,
        sender: mpsc::Sender<Result<WatchBatch>>,
        request_progress: Option<std::time::Duration>,
    ) {
        let mut ticker =
            tokio::time::interval(request_progress.unwrap_or(std::time::Duration::from_secs(3600)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let item = tokio::select! {
                () = sender.closed() => return,
                _ = ticker.tick(), if request_progress.is_some() => {
                    match stream.request_progress().await {
                        Ok(()) => continue,
                        Err(e) => Err(from_client_error(e)),
                    }
                }
                message = stream.message() => match message {
                    Ok(Some(response)) => match self.ending(&response) {
                        Some(error) => Err(error),
                        None => match self.batch(&response) {
                            Some(batch) => Ok(batch),
                            None => continue,
                        },
                    },
                    Ok(None) => Err(StoreError::Unavailable("etcd closed the watch".into())),
                    Err(e) => Err(from_client_error(e)),
                },
            };
            let failed = item.is_err();
            if sender.send(item).await.is_err() || failed {
                return;
            }
        }
    }

    /// The error a response ends the watch with, if it does.
    fn ending(&self, response: &WatchResponse) -> Option<StoreError> {
        if response.compact_revision() > 0 {
            return Some(StoreError::Compacted {
                requested: self.progress,
                compacted: ours(response.compact_revision()),
            });
        }
        if response.canceled() {
            return Some(StoreError::Unavailable(format!(
                "etcd canceled the watch of {:?}: {}",
                String::from_utf8_lossy(&self.prefix),
                response.cancel_reason()
            )));
        }
        None
    }

    /// The batch a response makes, if it moves the watch forward.
    fn batch(&mut self, response: &WatchResponse) -> Option<WatchBatch> {
        if response.created() {
            return None;
        }
        let events: Vec<Event> = response
            .events()
            .iter()
            .filter_map(event)
            .filter(|e| e.revision() > self.progress)
            .collect();
        let progress = match events.last() {
            Some(last) => last.revision(),
            None if response.events().is_empty() => ours(response.header()?.revision()),
            None => return None,
        };
        if progress <= self.progress {
            return None;
        }
        self.progress = progress;
        Some(WatchBatch { events, progress })
    }
}

/// Our event for one of etcd's.
fn event(event: &etcd_client::Event) -> Option<Event> {
    let kv = event.kv()?;
    let prev = event.prev_kv().map(key_value);
    Some(match event.event_type() {
        EventType::Put => Event {
            kind: EventKind::Put,
            kv: key_value(kv),
            prev,
        },
        EventType::Delete => Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                key: Bytes::copy_from_slice(kv.key()),
                value: Bytes::new(),
                create_revision: prev.as_ref().map_or(Revision::ZERO, |p| p.create_revision),
                mod_revision: ours(kv.mod_revision()),
                version: prev.as_ref().map_or(0, |p| p.version),
            },
            prev,
        },
    })
}
