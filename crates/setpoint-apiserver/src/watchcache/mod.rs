//! The watch cache: for each resource, the current objects and a window of recent events,
//! fed by one store watch. Lists and watches are served from it, so the store sees one watch
//! per resource however many clients watch. Each object is decoded and serialized once, when
//! its event arrives; every list and every watcher reuses those bytes.
//!
//! Promises: a watcher from resource version `R` gets every change after `R` exactly once, in
//! order, or a `410 Expired` when `R` is older than the window (or the cache had to relist
//! after the store compacted history it had not yet read).

mod object;
mod scan;
mod watcher;

pub(crate) use object::{CachedEvent, CachedObject, EventType, ServedJson, StoredForm};
pub(crate) use watcher::{Filter, Watcher};

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use parking_lot::RwLock;
use setpoint_core::{ApiError, Revision};
use setpoint_store::{ListRequest, Pages, Store, StoreError};
use tokio::sync::watch;

/// Whether a failed store watch may be resumed from the cache's revision (the store was
/// unreachable or the watch broke) rather than relisted (history compacted, store closed).
/// What a watch cache needs to know of the resource it holds (the registry's `ResourceDef`
/// is one): where its objects live, how a stored object is served, and its selectable fields.
pub(crate) trait CachedResource: Send + Sync + 'static {
    /// Every object of the resource is stored under this key prefix.
    fn key_prefix(&self) -> &str;
    /// The object as served, from the object as stored.
    fn served_from_storage(&self, stored: serde_json::Value) -> serde_json::Value;
    /// The values of every selectable field of `object`.
    fn field_set(&self, object: &serde_json::Value) -> std::collections::BTreeMap<String, String>;
    /// The resource's name in logs (`deployments.apps`).
    fn describe(&self) -> String;
    /// How its objects are stored when `served_from_storage` changes nothing but may be
    /// skipped (the object as stored is the object as served); `None` when it converts or
    /// defaults them.
    fn stored_form(&self) -> Option<StoredForm> {
        None
    }
}

fn resumable(error: &StoreError) -> bool {
    matches!(error, StoreError::Unavailable(_))
}

/// Reads every object of `def` from the store, at `at` (the current revision when `None`), in
/// pages of one snapshot; undecodable objects are logged and skipped. Returns the objects and
/// the revision they are at. This is how the cache loads, and how a consistent read is answered
/// when the store cannot tell the cache's watch promptly that it is current
/// ([`Store::watch_progress_is_prompt`]).
pub(crate) async fn list_store(
    def: &dyn CachedResource,
    store: &dyn Store,
    at: Option<Revision>,
) -> Result<(Objects, Revision), StoreError> {
    let prefix = Bytes::from(def.key_prefix().to_owned());
    let mut objects = Objects::new();
    let mut request = ListRequest::prefix(prefix).limit(1000);
    if let Some(at) = at {
        request = request.at(at);
    }
    let mut pages = Pages::new(store, request);
    let mut revision = Revision::ZERO;
    while let Some(page) = pages.next().await? {
        revision = page.revision;
        for (kv, decoded) in page.kvs.iter().zip(decode_all(def, &page.kvs)) {
            match decoded {
                Ok(o) => {
                    objects.insert(kv.key.clone(), Arc::new(o));
                }
                Err(e) => {
                    tracing::error!(key = %String::from_utf8_lossy(&kv.key), error = %e, "undecodable object skipped")
                }
            }
        }
    }
    Ok((objects, revision))
}

/// Decodes `kvs`, on every core when there are enough of them: a restarted server decodes every
/// stored object before it is ready, and decoding, not reading, is what that costs.
fn decode_all(
    def: &dyn CachedResource,
    kvs: &[setpoint_store::KeyValue],
) -> Vec<Result<CachedObject, String>> {
    let form = def.stored_form();
    let form = form.as_ref();
    let decode = |kvs: &[setpoint_store::KeyValue]| -> Vec<Result<CachedObject, String>> {
        kvs.iter()
            .map(|kv| CachedObject::decode_with(def, form, &kv.key, &kv.value, kv.mod_revision))
            .collect()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads < 2 || kvs.len() < 128 {
        return decode(kvs);
    }
    let mut chunks = kvs.chunks(kvs.len().div_ceil(threads));
    let first = chunks.next().unwrap_or_default();
    std::thread::scope(|scope| {
        let others: Vec<_> = chunks.map(|c| scope.spawn(move || decode(c))).collect();
        let mut all = decode(first);
        for other in others {
            match other.join() {
                Ok(decoded) => all.extend(decoded),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    })
}

/// How many re-watches in a row may fail (about half a minute of backoff) before the feed
/// gives up and relists.
const MAX_REWATCH_FAILURES: u32 = 20;

/// How many recent events each resource keeps for watchers to resume from.
pub(crate) const DEFAULT_WINDOW: usize = 10_000;

/// The objects, indexed by store key.
pub(crate) type Objects = imbl::OrdMap<Bytes, Arc<CachedObject>>;

/// The cache of one resource.
pub(crate) struct WatchCache {
    pub(crate) def: Arc<dyn CachedResource>,
    /// `def`'s [`StoredForm`], worked out once.
    form: Option<StoredForm>,
    state: RwLock<CacheState>,
    /// Bumped whenever the state changes; watchers and readers waiting for a revision wait on it.
    notify: watch::Sender<Revision>,
    window: usize,
    /// Cancelled when the resource stops being served (its CRD changed or went away): the
    /// feed ends and watchers finish.
    stopped: tokio_util::sync::CancellationToken,
    /// Events taken from the store since the cache started (for `/metrics`).
    events_received: std::sync::atomic::AtomicU64,
}

/// What a watch cache holds at one moment, for `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheFigures {
    /// Objects in the cache (the resource's objects in the store, as of `revision`).
    pub(crate) objects: usize,
    /// Recent events kept for watchers to resume from, and how many may be kept.
    pub(crate) events: usize,
    pub(crate) capacity: usize,
    /// Events taken from the store since the cache started.
    pub(crate) events_received: u64,
    /// The revision the cache has reached.
    pub(crate) revision: Revision,
}

struct CacheState {
    /// Every object as of `revision`.
    objects: Objects,
    /// The cache reflects every change up to here.
    revision: Revision,
    /// Every event with a revision above `oldest` (and up to `revision`) is in `events`.
    oldest: Revision,
    events: VecDeque<Arc<CachedEvent>>,
    /// False until the first list has been loaded.
    ready: bool,
}

impl WatchCache {
    /// Starts the cache of `def`, fed from `store` by a background task.
    pub(crate) fn start(
        def: Arc<dyn CachedResource>,
        store: Arc<dyn Store>,
        window: usize,
    ) -> Arc<WatchCache> {
        let cache = Arc::new(WatchCache {
            form: def.stored_form(),
            def,
            state: RwLock::new(CacheState {
                objects: Objects::new(),
                revision: Revision::ZERO,
                oldest: Revision::ZERO,
                events: VecDeque::new(),
                ready: false,
            }),
            notify: watch::Sender::new(Revision::ZERO),
            window: window.max(1),
            stopped: tokio_util::sync::CancellationToken::new(),
            events_received: std::sync::atomic::AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&cache);
        let stopped = cache.stopped.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(50);
            loop {
                let Some(cache) = weak.upgrade() else { return };
                let fed = tokio::select! {
                    () = stopped.cancelled() => return,
                    fed = cache.feed(store.as_ref()) => fed,
                };
                match fed {
                    Ok(()) => return, // the store closed
                    Err(error) => {
                        tracing::warn!(resource = %cache.def.describe(), %error, "watch cache relisting");
                    }
                }
                drop(cache);
                tokio::select! {
                    () = stopped.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        });
        cache
    }

    /// Stops feeding the cache and ends its watchers: the resource is no longer served.
    pub(crate) fn stop(&self) {
        self.stopped.cancel();
        self.notify.send_modify(|_| {});
    }

    /// Whether the first list has been loaded.
    pub(crate) fn is_ready(&self) -> bool {
        self.state.read().ready
    }

    /// Whether [`WatchCache::stop`] was called.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.is_cancelled()
    }

    /// Lists the store, then follows its watch until the store closes (`Ok`) or the watch
    /// fails (`Err`: the caller relists).
    async fn feed(&self, store: &dyn Store) -> Result<(), StoreError> {
        let prefix = Bytes::from(self.def.key_prefix().to_owned());
        let (objects, revision) = list_store(self.def.as_ref(), store, None).await?;
        {
            let mut state = self.state.write();
            state.objects = objects;
            state.revision = revision;
            state.oldest = revision;
            state.events.clear();
            state.ready = true;
        }
        self.notify.send_replace(revision);

        // Follow the store from the last revision applied. A failed watch (a store member
        // gone, a broken connection) is resumed from there, so watchers see no gap and no
        // relist; only history compacted before it was read (or a closed store) ends the feed.
        let mut backoff = Duration::from_millis(50);
        let mut failures = 0;
        loop {
            let mut stream = match store.watch(prefix.clone(), self.revision()).await {
                Ok(stream) => stream,
                // A store that stays away for long is relisted (by the caller) once back.
                Err(error) if resumable(&error) && failures < MAX_REWATCH_FAILURES => {
                    failures += 1;
                    tracing::warn!(resource = %self.def.describe(), %error, "watch cache re-watching");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
                Err(error) => return Err(error),
            };
            loop {
                match stream.next().await {
                    None => return Ok(()),
                    Some(Ok(batch)) => {
                        backoff = Duration::from_millis(50);
                        failures = 0;
                        let mut decoded = Vec::with_capacity(batch.events.len());
                        for event in &batch.events {
                            match CachedEvent::decode(self.def.as_ref(), self.form.as_ref(), event)
                            {
                                Ok(e) => decoded.push(Arc::new(e)),
                                Err(e) => {
                                    tracing::error!(revision = %event.revision(), error = %e, "undecodable event skipped")
                                }
                            }
                        }
                        let dropped = self.apply(decoded, batch.progress);
                        drop(dropped);
                    }
                    Some(Err(error)) if resumable(&error) => {
                        tracing::warn!(resource = %self.def.describe(), %error, "watch cache re-watching");
                        break;
                    }
                    Some(Err(error)) => return Err(error),
                }
            }
        }
    }

    /// Applies decoded events and the new progress revision; returns events pushed out of the
    /// window, to be freed outside the lock.
    fn apply(&self, events: Vec<Arc<CachedEvent>>, progress: Revision) -> Vec<Arc<CachedEvent>> {
        let mut dropped = Vec::new();
        self.events_received
            .fetch_add(events.len() as u64, std::sync::atomic::Ordering::Relaxed);
        {
            let mut state = self.state.write();
            for event in events {
                match event.kind {
                    EventType::Deleted => {
                        state.objects.remove(&event.object.key);
                    }
                    EventType::Added | EventType::Modified => {
                        state
                            .objects
                            .insert(event.object.key.clone(), event.object.clone());
                    }
                }
                state.revision = event.revision;
                state.events.push_back(event);
            }
            while state.events.len() > self.window {
                let old = state.events.pop_front().expect("non-empty");
                state.oldest = old.revision;
                dropped.push(old);
            }
            if progress > state.revision {
                state.revision = progress;
            }
        }
        self.notify.send_replace(progress);
        dropped
    }

    /// The cache's size and progress now.
    /// Cheap (API Priority and Fairness reads it for every LIST).
    pub(crate) fn figures(&self) -> CacheFigures {
        let state = self.state.read();
        CacheFigures {
            objects: state.objects.len(),
            events: state.events.len(),
            capacity: self.window,
            events_received: self
                .events_received
                .load(std::sync::atomic::Ordering::Relaxed),
            revision: state.revision,
        }
    }

    /// The bytes of JSON the objects hold: `(served copies, stored bytes)`. Walks every
    /// object (for `/metrics`).
    pub(crate) fn held_bytes(&self) -> (u64, u64) {
        // Summed outside the lock, on a snapshot (a cheap clone).
        let objects = self.state.read().objects.clone();
        objects.values().fold((0, 0), |(own, stored), object| {
            let (o, s) = object.json.held();
            (own + o as u64, stored + s as u64)
        })
    }

    /// The revision the cache has reached.
    pub(crate) fn revision(&self) -> Revision {
        self.state.read().revision
    }

    /// Whether the cache is loaded and has reached `revision`.
    pub(crate) fn has_reached(&self, revision: Revision) -> bool {
        let state = self.state.read();
        state.ready && state.revision >= revision
    }

    /// Waits until the cache has reached `revision` (at most `timeout`); a cache that cannot
    /// catch up in time answers `504` as kube-apiserver does for a too-large resource version.
    pub(crate) async fn wait_for(
        &self,
        revision: Revision,
        timeout: Duration,
    ) -> Result<(), ApiError> {
        let mut rx = self.notify.subscribe();
        let wait = async {
            loop {
                {
                    let state = self.state.read();
                    if state.ready && state.revision >= revision {
                        return;
                    }
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(timeout, wait).await.is_err() {
            return Err(ApiError::too_large_resource_version(
                revision.get(),
                self.revision().get(),
            ));
        }
        Ok(())
    }

    /// Waits (at most `timeout`) until the cache is loaded and holds no object; returns whether
    /// it got there. For a store whose watches do not learn their progress promptly, where
    /// waiting for a revision could time out on a quiet resource.
    pub(crate) async fn wait_until_empty(&self, timeout: Duration) -> bool {
        let mut rx = self.notify.subscribe();
        let wait = async {
            loop {
                {
                    let state = self.state.read();
                    if state.ready && state.objects.is_empty() {
                        return;
                    }
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }

    /// The objects and the revision they are at.
    pub(crate) fn snapshot(&self) -> (Objects, Revision) {
        let state = self.state.read();
        (state.objects.clone(), state.revision)
    }

    /// The objects as they were at `revision`, rebuilt from the event window; `410` if the
    /// window no longer reaches back that far.
    pub(crate) fn snapshot_at(&self, revision: Revision) -> Result<Objects, ApiError> {
        let state = self.state.read();
        if revision > state.revision {
            return Err(ApiError::too_large_resource_version(
                revision.get(),
                state.revision.get(),
            ));
        }
        if revision < state.oldest {
            return Err(ApiError::too_old_resource_version(
                revision.get(),
                state.oldest.get(),
            ));
        }
        let mut objects = state.objects.clone();
        for event in state
            .events
            .iter()
            .rev()
            .take_while(|e| e.revision > revision)
        {
            match &event.prev {
                Some(prev) => {
                    objects.insert(prev.key.clone(), prev.clone());
                }
                None => {
                    objects.remove(&event.object.key);
                }
            }
        }
        Ok(objects)
    }

    /// A watcher of changes after `after`.
    pub(crate) fn watch(
        self: &Arc<Self>,
        after: Revision,
        filter: Filter,
    ) -> Result<Watcher, ApiError> {
        let oldest = self.state.read().oldest;
        if after < oldest {
            return Err(ApiError::too_old_resource_version(
                after.get(),
                oldest.get(),
            ));
        }
        Ok(Watcher::new(
            self.clone(),
            after,
            filter,
            self.notify.subscribe(),
        ))
    }

    /// The events after `cursor` (at most `max`), and the revision the cache has reached; `410`
    /// if the window has moved past `cursor`.
    pub(crate) fn events_after(
        &self,
        cursor: Revision,
        max: usize,
    ) -> Result<(Vec<Arc<CachedEvent>>, Revision), ApiError> {
        let state = self.state.read();
        if cursor < state.oldest {
            return Err(ApiError::too_old_resource_version(
                cursor.get(),
                state.oldest.get(),
            ));
        }
        // Events are in revision order: binary-search the first one after the cursor.
        let start = state.events.partition_point(|e| e.revision <= cursor);
        let events: Vec<_> = state.events.range(start..).take(max).cloned().collect();
        Ok((events, state.revision))
    }
}
