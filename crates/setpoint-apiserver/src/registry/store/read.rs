//! Reads: one object from the store; lists and watch starts from the watch cache, at the
//! revision the request's `resourceVersion` semantics call for. Pages of one list share one
//! snapshot.
//!
//! Consistent reads (a list without `resourceVersion`, one with a revision the cache may not
//! have reached, a continue token) reflect every write acknowledged before them. They are
//! served from the watch cache once it has caught up with the store. A cache on a quiet
//! resource catches up only if the store tells its watch that nothing changed
//! ([`Store::watch_progress_is_prompt`](setpoint_store::Store::watch_progress_is_prompt)).
//! Where it cannot (etcd before 3.4.31 / 3.5.13 with default flags), waiting would time out
//! with a 504, so the read goes to the store itself, as kube-apiserver reads etcd when etcd
//! cannot answer progress requests (its `ConsistentListFromCache` fallback). Watches are
//! unaffected: one from a revision ahead of the cache starts at once and skips the events up to
//! that revision when they arrive.
//!
//! Until a cache has loaded (after a start or a restart), lists are read from the store
//! itself, and a watch is answered `429` with `Retry-After: 1`, as kube-apiserver answers while
//! its storage is initializing: clients retry, nothing waits for the cache or times out.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Reason, Revision};

use super::{store_error, ListOptions, RegistryStore, RvMatch, CACHE_CATCH_UP};
use crate::registry::meta;
use crate::registry::store::Continue;
use crate::registry::Peers;
use crate::watchcache::{list_store, CachedObject, Objects, Watcher};

/// One page of a list.
pub(crate) struct ListPage {
    pub(crate) items: Vec<Arc<CachedObject>>,
    /// The revision the list was read at.
    pub(crate) revision: Revision,
    /// Where the next page starts, when there is one.
    pub(crate) continue_token: Option<String>,
    /// How many selected objects the next pages hold (when the list is not filtered).
    pub(crate) remaining: Option<u64>,
}

/// A create's view of the other objects of its resource (a service's cluster IP must be free).
#[async_trait::async_trait]
impl Peers for RegistryStore {
    async fn objects(&self) -> Result<Vec<Value>, ApiError> {
        self.consistent_values().await
    }
}

impl RegistryStore {
    /// The stored object `name` in `namespace`, with its resource version; 404 if absent.
    pub(crate) async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let kv = self
            .store
            .get(self.def.key(namespace, name).as_bytes())
            .await
            .map_err(|e| self.error_for(name, e))?
            .ok_or_else(|| self.not_found(name))?;
        let stored: Value = serde_json::from_slice(&kv.value)
            .map_err(|e| ApiError::internal(format!("stored object does not decode: {e}")))?;
        let mut object = self.served(stored).await?;
        meta::metadata(&mut object)
            .insert("resourceVersion".into(), json!(kv.mod_revision.to_string()));
        Ok(object)
    }

    /// The objects at the store's current revision or later, and that revision: every write
    /// acknowledged before the call is in them.
    pub(crate) async fn consistent(&self) -> Result<(Objects, Revision), ApiError> {
        let current = self.store.current_revision().await.map_err(store_error)?;
        self.not_older_than(current).await
    }

    /// Every object, read consistently, as JSON values.
    pub(crate) async fn consistent_values(&self) -> Result<Vec<Value>, ApiError> {
        let (objects, _) = self.consistent().await?;
        Ok(objects
            .values()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.json.bytes()).ok())
            .collect())
    }

    /// The objects at `revision` or later, and the revision they are at; `504` when the store
    /// has not reached `revision`.
    pub(crate) async fn not_older_than(
        &self,
        revision: Revision,
    ) -> Result<(Objects, Revision), ApiError> {
        if self.cache.is_ready()
            && (self.store.watch_progress_is_prompt() || self.cache.has_reached(revision))
        {
            self.cache.wait_for(revision, CACHE_CATCH_UP).await?;
            return Ok(self.cache.snapshot());
        }
        let (objects, at) = list_store(self.def.as_ref(), self.store.as_ref(), None)
            .await
            .map_err(store_error)?;
        if at < revision {
            return Err(ApiError::too_large_resource_version(
                revision.get(),
                at.get(),
            ));
        }
        Ok((objects, at))
    }

    /// The objects exactly as they were at `revision`; `410` if that is older than the
    /// cache's window (or the store's history), `504` if the store has not reached it.
    pub(crate) async fn exactly_at(&self, revision: Revision) -> Result<Objects, ApiError> {
        if self.cache.is_ready()
            && (self.store.watch_progress_is_prompt() || self.cache.has_reached(revision))
        {
            self.cache.wait_for(revision, CACHE_CATCH_UP).await?;
            return self.cache.snapshot_at(revision);
        }
        list_store(self.def.as_ref(), self.store.as_ref(), Some(revision))
            .await
            .map(|(objects, _)| objects)
            .map_err(store_error)
    }

    /// The snapshot a list with `options` reads, and its revision.
    async fn snapshot(&self, options: &ListOptions) -> Result<(Objects, Revision), ApiError> {
        if let Some(token) = &options.continue_token {
            let objects = self.exactly_at(token.revision).await.map_err(|e| {
                if e.reason == Reason::Expired {
                    ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results.")
                } else {
                    e
                }
            })?;
            return Ok((objects, token.revision));
        }
        match options.rv {
            RvMatch::MostRecent => self.consistent().await,
            RvMatch::Any if !self.cache.is_ready() => {
                list_store(self.def.as_ref(), self.store.as_ref(), None)
                    .await
                    .map_err(store_error)
            }
            RvMatch::Any => {
                self.cache.wait_for(Revision::ZERO, CACHE_CATCH_UP).await?;
                Ok(self.cache.snapshot())
            }
            RvMatch::NotOlderThan(r) => self.not_older_than(r).await,
            RvMatch::Exact(r) => Ok((self.exactly_at(r).await?, r)),
        }
    }

    /// One page of the objects of `namespace` (all namespaces: `None`) that `options` select.
    pub(crate) async fn list(
        &self,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        let (objects, revision) = self.snapshot(options).await?;
        let prefix = Bytes::from(self.def.collection_prefix(namespace));
        let start = match &options.continue_token {
            // A token from another collection (or a forged one) starts outside this one's range.
            Some(c) if !c.start.as_bytes().starts_with(&prefix) => {
                return Err(ApiError::bad_request(
                    "continue key is not valid: it does not belong to this collection",
                ))
            }
            Some(c) => Bound::Included(Bytes::from(c.start.clone())),
            None => Bound::Included(prefix.clone()),
        };
        let end = setpoint_store::prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
        let limit = options.limit.unwrap_or(usize::MAX);
        let unfiltered =
            options.filter.labels.is_everything() && options.filter.fields.is_everything();
        let mut items: Vec<Arc<CachedObject>> = Vec::new();
        // The page ends at the first selected object past `limit`: whether there is one decides
        // the continue token. The rest of the range is walked only to count it for
        // `remainingItemCount`, on the first page of an unfiltered list; later pages take the
        // count from their token.
        let mut more = false;
        let mut walked = 0u64;
        for (_, o) in objects.range((start.clone(), end.clone())) {
            // A list of many objects served from the cache never waits for anything: spend the
            // task's scheduling budget per object, so a flood of wide LISTs yields the worker
            // threads to other requests now and then instead of holding them for its whole run.
            tokio::task::consume_budget().await;
            walked += 1;
            if !options.filter.matches(o) {
                continue;
            }
            if items.len() < limit {
                items.push(o.clone());
            } else {
                more = true;
                break;
            }
        }
        let remaining = match (more && unfiltered, &options.continue_token) {
            (false, _) => None,
            (
                true,
                Some(Continue {
                    remaining: Some(left),
                    ..
                }),
            ) => Some(left.saturating_sub(items.len() as u64)),
            // The first page (or a token without a count): count what follows this page.
            (true, _) => {
                Some((objects.range((start, end)).count() as u64).saturating_sub(walked - 1))
            }
        };
        let items = super::served_objects(&self.def, items).await?;
        let mut page = ListPage {
            items,
            revision,
            continue_token: None,
            remaining: None,
        };
        if more {
            let last = page.items.last().map(|o| o.key.clone()).unwrap_or_default();
            let mut start = String::from_utf8_lossy(&last).into_owned();
            start.push('\0');
            page.continue_token = Some(
                Continue {
                    revision,
                    start,
                    remaining,
                }
                .encode(),
            );
            page.remaining = remaining;
        }
        Ok(page)
    }

    /// Starts a watch with `options`: the objects to send first as `ADDED` events (for a
    /// watch without `resourceVersion`, or a streaming list with `send_initial`), the
    /// revision they are at, and the watcher of the changes after it.
    pub(crate) async fn watch(
        &self,
        options: &ListOptions,
        send_initial: bool,
    ) -> Result<(VecDeque<Arc<CachedObject>>, Revision, Watcher), ApiError> {
        if !self.cache.is_ready() {
            return Err(initializing());
        }
        let (initial, start) = match options.rv {
            RvMatch::MostRecent => initial_objects(&self.consistent().await?, options),
            RvMatch::Any => initial_objects(&self.cache.snapshot(), options),
            RvMatch::NotOlderThan(r) if send_initial => {
                initial_objects(&self.not_older_than(r).await?, options)
            }
            RvMatch::NotOlderThan(r) | RvMatch::Exact(r) => (VecDeque::new(), r),
        };
        let watcher = self.cache.watch(start, options.filter.clone())?;
        Ok((initial, start, watcher))
    }
}

/// kube-apiserver's answer to a watch while its cache is (re)loading: `429`, retry in a second.
fn initializing() -> ApiError {
    let mut error = ApiError::new(Reason::TooManyRequests, "storage is (re)initializing");
    error.details = Some(Box::new(setpoint_core::Details {
        retry_after_seconds: Some(1),
        ..Default::default()
    }));
    error
}

fn initial_objects(
    snapshot: &(Objects, Revision),
    options: &ListOptions,
) -> (VecDeque<Arc<CachedObject>>, Revision) {
    let objects = snapshot
        .0
        .values()
        .filter(|o| options.filter.matches(o))
        .cloned()
        .collect();
    (objects, snapshot.1)
}
