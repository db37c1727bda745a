//! [`TimedStore`]: the store as the API server uses it, each call timed into
//! `etcd_request_duration_seconds{operation, type}` (`type`: the resource, from the key's
//! `/registry/<resource>/` prefix).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use setpoint_core::Revision;
use setpoint_store::{Event, KeyValue, ListRequest, ListResult, Result, Store, WatchStream};

use super::Telemetry;

/// A store whose calls are timed.
pub(crate) struct TimedStore {
    inner: Arc<dyn Store>,
    telemetry: Arc<Telemetry>,
}

impl TimedStore {
    pub(crate) fn new(inner: Arc<dyn Store>, telemetry: Arc<Telemetry>) -> TimedStore {
        TimedStore { inner, telemetry }
    }

    fn record(&self, operation: &'static str, key: &[u8], started: Instant) {
        self.telemetry
            .store_call(operation, kind_of(key), started.elapsed());
    }
}

/// The resource a key belongs to: `/registry/configmaps/default/x` → `configmaps`;
/// `/registry/example.com/widgets/default/x` (a group's resource) → `widgets.example.com`.
fn kind_of(key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    let mut parts = key.trim_start_matches('/').split('/').skip(1);
    match (parts.next(), parts.next()) {
        (Some(group), Some(plural)) if group.contains('.') && !plural.is_empty() => {
            format!("{plural}.{group}")
        }
        (Some(first), _) => first.to_owned(),
        (None, _) => String::new(),
    }
}

#[async_trait]
impl Store for TimedStore {
    async fn current_revision(&self) -> Result<Revision> {
        let started = Instant::now();
        let out = self.inner.current_revision().await;
        self.record("current_revision", b"", started);
        out
    }

    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let started = Instant::now();
        let out = self.inner.get(key).await;
        self.record("get", key, started);
        out
    }

    async fn list(&self, request: ListRequest) -> Result<ListResult> {
        let prefix = request.prefix.clone();
        let started = Instant::now();
        let out = self.inner.list(request).await;
        self.record("list", &prefix, started);
        out
    }

    async fn count(&self, prefix: &[u8]) -> Result<u64> {
        let started = Instant::now();
        let out = self.inner.count(prefix).await;
        self.record("count", prefix, started);
        out
    }

    async fn create(&self, key: Bytes, value: Bytes) -> Result<KeyValue> {
        let started = Instant::now();
        let out = self.inner.create(key.clone(), value).await;
        self.record("create", &key, started);
        out
    }

    async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        let started = Instant::now();
        let out = self.inner.update(key.clone(), value, expected).await;
        self.record("update", &key, started);
        out
    }

    async fn delete(&self, key: Bytes, expected: Option<Revision>) -> Result<Event> {
        let started = Instant::now();
        let out = self.inner.delete(key.clone(), expected).await;
        self.record("delete", &key, started);
        out
    }

    async fn watch(&self, prefix: Bytes, after: Revision) -> Result<WatchStream> {
        let started = Instant::now();
        let out = self.inner.watch(prefix.clone(), after).await;
        self.record("watch", &prefix, started);
        out
    }

    fn watch_progress_is_prompt(&self) -> bool {
        self.inner.watch_progress_is_prompt()
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let started = Instant::now();
        let out = self.inner.compact(revision).await;
        self.record("compact", b"", started);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_should_name_their_resource() {
        assert_eq!(kind_of(b"/registry/configmaps/default/x"), "configmaps");
        assert_eq!(
            kind_of(b"/registry/example.com/widgets/d/w"),
            "widgets.example.com"
        );
        assert_eq!(kind_of(b"/registry/deployments/"), "deployments");
        assert_eq!(kind_of(b""), "");
    }
}
