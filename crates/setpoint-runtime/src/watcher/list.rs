//! The list phase of the watcher's state machine: a streaming list (`sendInitialEvents`,
//! complete at the `k8s.io/initial-events-end` bookmark) or a paged list (`limit`/`continue`),
//! ending in one [`WatcherEvent::Listed`] with the complete set.

use std::collections::HashMap;
use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ListParams, WatchEvent};
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::error::{status_code, WatchError};
use super::machine::{Machine, Resume, State, Step, STALL_GRACE};
use super::source::EventStream;
use super::stats::WatchStats;
use super::{InitialList, WatcherEvent};
use crate::ObjectKey;

/// The annotation on the bookmark that completes a streaming list.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

impl<K> Machine<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts a complete list: streaming unless configured not to, paged otherwise.
    pub(super) async fn relist(&mut self) -> Step<K> {
        if self.config.initial_list == InitialList::List {
            return Step::Next(State::Paging {
                objects: Vec::new(),
                continue_token: None,
                expired_restarts: 0,
            });
        }
        // Not older than what this watcher has seen; the first time, unset: a consistent
        // read (the server's current state), as client-go's streaming lists.
        let from = self.last_seen.clone().unwrap_or_default();
        let (params, timeout) = self.watch_params(true);
        WatchStats::bump(&self.stats.watches);
        match self.source.watch(&params, &from).await {
            Ok(stream) => Step::Next(State::StreamingList {
                stream,
                objects: HashMap::new(),
                opened: Instant::now(),
                timeout,
            }),
            Err(source) => {
                let error = WatchError::Watch {
                    resource: self.source.resource().to_string(),
                    source,
                };
                self.streaming_failed(error)
            }
        }
    }

    /// A streaming list failed (refused, broken, or ended early): [`InitialList::Auto`] falls
    /// back to a paged list at once (and tries streaming again at the next relist, as
    /// client-go does), [`InitialList::Stream`] backs off and tries again.
    fn streaming_failed(&mut self, error: WatchError) -> Step<K> {
        match self.config.initial_list {
            InitialList::Auto => {
                tracing::debug!(error = %error.report(), "streaming list failed; falling back to a paged list");
                Step::Next(State::Paging {
                    objects: Vec::new(),
                    continue_token: None,
                    expired_restarts: 0,
                })
            }
            InitialList::Stream | InitialList::List => self.fail(error, Resume::Relist),
        }
    }

    /// Reads one page of a paged list.
    pub(super) async fn page(
        &mut self,
        mut objects: Vec<K>,
        continue_token: Option<String>,
        expired_restarts: u32,
    ) -> Step<K> {
        let mut params = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            limit: self.config.page_size,
            ..ListParams::default()
        };
        params.continue_token = continue_token.clone();
        match self.source.list(&params).await {
            Ok(list) => {
                objects.extend(list.items.into_iter().map(|o| self.transformed(o)));
                match list.metadata.continue_.filter(|token| !token.is_empty()) {
                    Some(token) => Step::Next(State::Paging {
                        objects,
                        continue_token: Some(token),
                        expired_restarts,
                    }),
                    None => {
                        let resource_version = list.metadata.resource_version.unwrap_or_default();
                        self.listed(objects, resource_version, None)
                    }
                }
            }
            Err(source)
                if status_code(&source) == Some(410)
                    && continue_token.is_some()
                    && expired_restarts == 0 =>
            {
                tracing::debug!(
                    resource = self.source.resource(),
                    "continue token expired; restarting the list"
                );
                Step::Next(State::Paging {
                    objects: Vec::new(),
                    continue_token: None,
                    expired_restarts: expired_restarts + 1,
                })
            }
            Err(source) => {
                let error = WatchError::List {
                    resource: self.source.resource().to_string(),
                    source,
                };
                self.fail(error, Resume::Relist)
            }
        }
    }

    /// Reads the next initial event of a streaming list.
    pub(super) async fn stream_list(
        &mut self,
        mut stream: EventStream<K>,
        mut objects: HashMap<ObjectKey, K>,
        opened: Instant,
        timeout: Duration,
    ) -> Step<K> {
        let deadline = opened + timeout + STALL_GRACE;
        let incomplete = || WatchError::IncompleteStream {
            resource: self.source.resource().to_string(),
        };
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) | Ok(None) => {
                let error = incomplete();
                self.streaming_failed(error)
            }
            Ok(Some(Err(source))) => {
                let error = WatchError::Watch {
                    resource: self.source.resource().to_string(),
                    source,
                };
                self.streaming_failed(error)
            }
            Ok(Some(Ok(event))) => match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    let object = self.transformed(object);
                    objects.insert(ObjectKey::of(&object), object);
                    Step::Next(State::StreamingList {
                        stream,
                        objects,
                        opened,
                        timeout,
                    })
                }
                WatchEvent::Deleted(object) => {
                    objects.remove(&ObjectKey::of(&object));
                    Step::Next(State::StreamingList {
                        stream,
                        objects,
                        opened,
                        timeout,
                    })
                }
                WatchEvent::Bookmark(bookmark) => {
                    let end = bookmark.metadata.annotations.get(INITIAL_EVENTS_END);
                    if end.map(String::as_str) != Some("true") {
                        return Step::Next(State::StreamingList {
                            stream,
                            objects,
                            opened,
                            timeout,
                        });
                    }
                    let resource_version = bookmark.metadata.resource_version;
                    let objects = objects.into_values().collect();
                    self.listed(objects, resource_version, Some((stream, opened, timeout)))
                }
                WatchEvent::Error(status) => {
                    let error = WatchError::ErrorEvent {
                        resource: self.source.resource().to_string(),
                        code: status.code,
                        message: status.message,
                    };
                    self.streaming_failed(error)
                }
            },
        }
    }

    /// A complete list arrived: hand it out, then watch from its resource version (on the
    /// streaming list's own stream, if there is one).
    fn listed(
        &mut self,
        objects: Vec<K>,
        resource_version: String,
        stream: Option<(EventStream<K>, Instant, Duration)>,
    ) -> Step<K> {
        WatchStats::bump(&self.stats.lists);
        self.stats.succeeded();
        self.last_seen = Some(resource_version.clone());
        let next = match stream {
            Some((stream, opened, timeout)) => State::Watching {
                stream,
                resource_version: resource_version.clone(),
                opened,
                timeout,
                events: 1,
            },
            None => State::Rewatch {
                resource_version: resource_version.clone(),
            },
        };
        Step::Emit(
            next,
            Ok(WatcherEvent::Listed {
                objects,
                resource_version,
            }),
        )
    }
}
