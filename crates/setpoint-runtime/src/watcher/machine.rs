//! The watcher's state machine: list (paged or streaming), then watch from the list's
//! resource version, renewing watches as they end, relisting on `410 Gone`, backing off on
//! errors. One [`State`] at a time, stepped by [`Machine::next`] until it has an event or an
//! error to hand out. This file holds the states, the loop and the watch phase; `list.rs` the
//! list phase.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::{WatchEvent, WatchParams};
use kube::Resource;
use rand::Rng;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::backoff::BackoffState;
use super::error::{status_code, WatchError};
use super::source::{EventStream, ListWatch};
use super::stats::WatchStats;
use super::{WatcherConfig, WatcherEvent};
use crate::ObjectKey;

/// How long past its requested timeout a watch may stay open before it is presumed dead (a
/// connection lost without a reset) and renewed.
pub(super) const STALL_GRACE: Duration = Duration::from_secs(30);

/// What the watcher is doing.
pub(super) enum State<K> {
    /// About to start a complete list (streaming or paged).
    Relist,
    /// A paged list in progress.
    Paging {
        /// The objects of the pages read so far.
        objects: Vec<K>,
        /// Where the next page starts; `None` for the first page.
        continue_token: Option<String>,
        /// How many times this list restarted because its continue token expired.
        expired_restarts: u32,
    },
    /// A streaming list (`sendInitialEvents`): collecting the initial events until the
    /// bookmark that ends them.
    StreamingList {
        stream: EventStream<K>,
        /// The objects so far, by key (a later event for a key replaces the earlier one).
        objects: HashMap<ObjectKey, K>,
        /// When the watch was opened.
        opened: Instant,
        /// The timeout the server was asked for.
        timeout: Duration,
    },
    /// About to open a watch from `resource_version`.
    Rewatch { resource_version: String },
    /// A watch in progress, delivering changes after `resource_version`.
    Watching {
        stream: EventStream<K>,
        /// The last resource version seen (object or bookmark).
        resource_version: String,
        /// When the watch was opened.
        opened: Instant,
        /// The timeout the server was asked for.
        timeout: Duration,
        /// Events (bookmarks included) received on this watch.
        events: u64,
    },
    /// Waiting out a backoff before `then`.
    Backoff { until: Instant, then: Resume },
}

/// What to do after a backoff.
#[derive(Debug)]
pub(super) enum Resume {
    /// List again from scratch.
    Relist,
    /// Watch again from this resource version.
    Rewatch(String),
}

/// The outcome of one step.
pub(super) enum Step<K> {
    /// Go on to this state without yielding anything.
    Next(State<K>),
    /// Go on to this state after yielding this item.
    Emit(State<K>, Result<WatcherEvent<K>, WatchError>),
}

/// A watcher: its source, configuration, counters, backoff and current state.
pub(crate) struct Machine<K> {
    pub(super) source: ListWatch<K>,
    pub(super) config: WatcherConfig,
    pub(super) stats: Arc<WatchStats>,
    backoff: BackoffState,
    /// The resource version of the last complete list, or of the watch that expired since:
    /// a relist asks for data not older than this.
    pub(super) last_seen: Option<String>,
    state: State<K>,
    /// Applied to each object as it is decoded, before a list collects it or an event
    /// carries it, so a list never holds untransformed objects beyond the page being read.
    transform: Option<Transform<K>>,
}

/// A function applied to every object a watcher yields.
pub(crate) type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

impl<K> Machine<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A watcher that has not listed yet.
    pub(crate) fn new(source: ListWatch<K>, config: WatcherConfig, stats: Arc<WatchStats>) -> Self {
        Machine {
            source,
            backoff: BackoffState::new(config.backoff),
            config,
            stats,
            last_seen: None,
            state: State::Relist,
            transform: None,
        }
    }

    /// This watcher, passing every object through `transform` as it arrives.
    pub(crate) fn with_transform(mut self, transform: Option<Transform<K>>) -> Self {
        self.transform = transform;
        self
    }

    /// `object` through the transform, if any.
    pub(super) fn transformed(&self, object: K) -> K {
        match &self.transform {
            Some(transform) => transform(object),
            None => object,
        }
    }

    /// The watcher as a stream that never ends.
    pub(crate) fn into_stream(
        self,
    ) -> impl Stream<Item = Result<WatcherEvent<K>, WatchError>> + Send + 'static {
        futures::stream::unfold(self, |mut machine| async move {
            let item = machine.next().await;
            Some((item, machine))
        })
    }

    /// Steps until there is an event or an error to hand out.
    ///
    /// Not cancel-safe: a call dropped while waiting leaves the watcher to relist on the
    /// next call (nothing is lost, but the work is repeated). The stream from
    /// [`Machine::into_stream`] never drops a call half-way.
    pub(crate) async fn next(&mut self) -> Result<WatcherEvent<K>, WatchError> {
        loop {
            let state = std::mem::replace(&mut self.state, State::Relist);
            let step = match state {
                State::Relist => self.relist().await,
                State::Paging {
                    objects,
                    continue_token,
                    expired_restarts,
                } => self.page(objects, continue_token, expired_restarts).await,
                State::StreamingList {
                    stream,
                    objects,
                    opened,
                    timeout,
                } => self.stream_list(stream, objects, opened, timeout).await,
                State::Rewatch { resource_version } => self.rewatch(resource_version).await,
                State::Watching {
                    stream,
                    resource_version,
                    opened,
                    timeout,
                    events,
                } => {
                    self.watch(stream, resource_version, opened, timeout, events)
                        .await
                }
                State::Backoff { until, then } => {
                    tokio::time::sleep_until(until).await;
                    Step::Next(match then {
                        Resume::Relist => State::Relist,
                        Resume::Rewatch(resource_version) => State::Rewatch { resource_version },
                    })
                }
            };
            match step {
                Step::Next(state) => self.state = state,
                Step::Emit(state, item) => {
                    self.state = state;
                    return item;
                }
            }
        }
    }

    /// Opens a watch from `resource_version`.
    async fn rewatch(&mut self, resource_version: String) -> Step<K> {
        let (params, timeout) = self.watch_params(false);
        WatchStats::bump(&self.stats.watches);
        match self.source.watch(&params, &resource_version).await {
            Ok(stream) => {
                self.stats.succeeded();
                Step::Next(State::Watching {
                    stream,
                    resource_version,
                    opened: Instant::now(),
                    timeout,
                    events: 0,
                })
            }
            Err(source) if status_code(&source) == Some(410) => {
                tracing::debug!(resource = self.source.resource(), %resource_version, "resource version gone; relisting");
                self.last_seen = Some(resource_version);
                Step::Next(State::Relist)
            }
            Err(source) => {
                let error = WatchError::Watch {
                    resource: self.source.resource().to_string(),
                    source,
                };
                self.fail(error, Resume::Rewatch(resource_version))
            }
        }
    }

    /// Reads the next event of a watch.
    async fn watch(
        &mut self,
        mut stream: EventStream<K>,
        mut resource_version: String,
        opened: Instant,
        timeout: Duration,
        mut events: u64,
    ) -> Step<K> {
        let deadline = opened + timeout + STALL_GRACE;
        let event = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => {
                tracing::warn!(
                    resource = self.source.resource(),
                    "watch silent past its timeout; renewing it"
                );
                WatchStats::bump(&self.stats.watch_restarts);
                return Step::Next(State::Rewatch { resource_version });
            }
            Ok(None) => {
                WatchStats::bump(&self.stats.watch_restarts);
                let elapsed = opened.elapsed();
                if events == 0 && elapsed < (timeout / 2).min(Duration::from_secs(1)) {
                    let error = WatchError::VeryShortWatch {
                        resource: self.source.resource().to_string(),
                        elapsed,
                    };
                    return self.fail(error, Resume::Rewatch(resource_version));
                }
                return Step::Next(State::Rewatch { resource_version });
            }
            Ok(Some(Err(source))) => {
                WatchStats::bump(&self.stats.watch_restarts);
                let error = WatchError::Watch {
                    resource: self.source.resource().to_string(),
                    source,
                };
                return self.fail(error, Resume::Rewatch(resource_version));
            }
            Ok(Some(Ok(event))) => event,
        };
        events += 1;
        let item = match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                if let Some(rv) = &object.meta().resource_version {
                    resource_version.clone_from(rv);
                }
                WatcherEvent::Applied(self.transformed(object))
            }
            WatchEvent::Deleted(object) => {
                if let Some(rv) = &object.meta().resource_version {
                    resource_version.clone_from(rv);
                }
                WatcherEvent::Deleted(self.transformed(object))
            }
            WatchEvent::Bookmark(bookmark) => {
                resource_version = bookmark.metadata.resource_version;
                return Step::Next(State::Watching {
                    stream,
                    resource_version,
                    opened,
                    timeout,
                    events,
                });
            }
            WatchEvent::Error(status) if status.code == 410 => {
                tracing::debug!(resource = self.source.resource(), %resource_version, "watch expired; relisting");
                self.last_seen = Some(resource_version);
                return Step::Next(State::Relist);
            }
            WatchEvent::Error(status) => {
                WatchStats::bump(&self.stats.watch_restarts);
                let error = WatchError::ErrorEvent {
                    resource: self.source.resource().to_string(),
                    code: status.code,
                    message: status.message,
                };
                return self.fail(error, Resume::Rewatch(resource_version));
            }
        };
        Step::Emit(
            State::Watching {
                stream,
                resource_version,
                opened,
                timeout,
                events,
            },
            Ok(item),
        )
    }

    /// Records a failure, then backs off before `then`.
    pub(super) fn fail(&mut self, error: WatchError, then: Resume) -> Step<K> {
        let report = error.report();
        tracing::warn!(error = %report, "list/watch failed; backing off");
        self.stats.failed(report);
        let delay = self.backoff.next_delay(Instant::now());
        Step::Emit(
            State::Backoff {
                until: Instant::now() + delay,
                then,
            },
            Err(error),
        )
    }

    /// Watch parameters with a random timeout from the configured range, and that timeout.
    pub(super) fn watch_params(&self, send_initial_events: bool) -> (WatchParams, Duration) {
        let (min, max) = self.config.watch_timeout;
        let min = min.as_secs().max(1);
        let max = max.as_secs().max(min);
        let secs = rand::thread_rng().gen_range(min..=max);
        let mut params = WatchParams::default().timeout(u32::try_from(secs).unwrap_or(u32::MAX));
        params.label_selector = self.config.label_selector.clone();
        params.field_selector = self.config.field_selector.clone();
        params.send_initial_events = send_initial_events;
        (params, Duration::from_secs(secs))
    }
}
