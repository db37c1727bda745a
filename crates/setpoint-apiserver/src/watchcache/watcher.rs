//! A watcher of one resource's cache: a cursor into the event window plus a filter. Like the
//! store's watchers it has no buffer of its own; a watcher too slow for the window ends with
//! `410 Expired` and its client relists.

use std::sync::Arc;

use setpoint_core::{ApiError, FieldSelector, LabelSelector, Revision};
use tokio::sync::watch;

use super::{CachedEvent, CachedObject, EventType, WatchCache};

/// Most events handed out at once: a watcher catching up sends them in chunks of a few hundred
/// KiB rather than building megabyte chunks that the TLS layer then copies again.
const BATCH: usize = 256;

/// Which objects a watch or list selects.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

impl Filter {
    pub(crate) fn matches(&self, object: &CachedObject) -> bool {
        if let Some(ns) = &self.namespace {
            if object.namespace.as_deref() != Some(ns.as_str()) {
                return false;
            }
        }
        self.labels.matches(&object.labels) && self.fields.matches_with(|f| object.fields.get(f))
    }
}

/// One event as a watcher delivers it: the type may differ from the stored event's when an
/// update moves an object into or out of the filter.
pub(crate) struct WatchEvent {
    pub(crate) kind: EventType,
    pub(crate) object: Arc<CachedObject>,
}

/// A cursor over a cache's events.
pub(crate) struct Watcher {
    cache: Arc<WatchCache>,
    cursor: Revision,
    filter: Filter,
    wake: watch::Receiver<Revision>,
}

impl Watcher {
    pub(super) fn new(
        cache: Arc<WatchCache>,
        cursor: Revision,
        filter: Filter,
        wake: watch::Receiver<Revision>,
    ) -> Self {
        Watcher {
            cache,
            cursor,
            filter,
            wake,
        }
    }

    /// Whether the watched resource stopped being served (the watch just ends).
    pub(crate) fn is_stopped(&self) -> bool {
        self.cache.is_stopped()
    }

    /// The last revision delivered (or skipped as not matching).
    pub(crate) fn cursor(&self) -> Revision {
        self.cursor
    }

    /// The next events for this watcher, waiting for some; `Ok(empty)` means the cache moved
    /// on without anything for this watcher (a chance to send a bookmark). Cancel-safe.
    pub(crate) async fn next(&mut self) -> Result<Vec<WatchEvent>, ApiError> {
        loop {
            self.wake.borrow_and_update();
            let (events, reached) = self.cache.events_after(self.cursor, BATCH)?;
            if !events.is_empty() {
                let out = self.translate(&events);
                self.cursor = events.last().map_or(self.cursor, |e| e.revision);
                return Ok(out);
            }
            if reached > self.cursor {
                self.cursor = reached;
                return Ok(Vec::new());
            }
            if self.cache.is_stopped() {
                return Err(ApiError::new(
                    setpoint_core::Reason::NotFound,
                    "the resource is no longer served",
                ));
            }
            if self.wake.changed().await.is_err() {
                return Err(ApiError::unavailable("the watch cache stopped"));
            }
        }
    }

    /// The events already waiting for this watcher, without waiting (empty if none). On an
    /// error the cursor stays, so the next [`Watcher::next`] reports it again.
    pub(crate) fn try_next(&mut self) -> Result<Vec<WatchEvent>, ApiError> {
        let (events, _) = self.cache.events_after(self.cursor, BATCH)?;
        let out = self.translate(&events);
        self.cursor = events.last().map_or(self.cursor, |e| e.revision);
        Ok(out)
    }

    fn translate(&self, events: &[Arc<CachedEvent>]) -> Vec<WatchEvent> {
        let mut out = Vec::new();
        for e in events {
            let now = self.filter.matches(&e.object);
            let before = e.prev.as_ref().is_some_and(|p| self.filter.matches(p));
            let kind = match (e.kind, before, now) {
                (EventType::Deleted, _, m) if m || before => EventType::Deleted,
                (EventType::Deleted, _, _) => continue,
                (_, true, true) => EventType::Modified,
                (_, false, true) => EventType::Added,
                (_, true, false) => EventType::Deleted,
                (_, false, false) => continue,
            };
            out.push(WatchEvent {
                kind,
                object: e.object.clone(),
            });
        }
        out
    }
}
