//! What the API server counts about itself, for `/metrics`: requests by verb, resource, scope
//! and code with their durations (`apiserver_request_total`,
//! `apiserver_request_duration_seconds`), watches open (`apiserver_longrunning_requests`),
//! the store's operations with their durations (`etcd_request_duration_seconds`, the
//! name kube-apiserver gives its storage latency whatever the backend), events sent to
//! watchers (`apiserver_watch_events_total`), and each watch cache's figures
//! ([`CacheSnapshot`]: `apiserver_storage_objects` and the `apiserver_watch_cache_*` series).
//!
//! Counting is a lock and a map update per request; rendering is the embedding process's
//! (`setpoint server` merges these with its loops' metrics into one Prometheus text
//! exposition, [`Api::set_metrics_renderer`](crate::Api::set_metrics_renderer)): this module
//! only hands out [`Snapshot`]s.

mod labels;
mod longrunning;
mod store;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

pub(crate) use labels::RequestLabels;
pub(crate) use longrunning::{hold_longrunning, track_longrunning};
pub(crate) use store::TimedStore;

/// kube-apiserver's request duration buckets, in seconds.
pub const REQUEST_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// kube-apiserver's storage latency buckets, in seconds.
pub const STORE_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Durations in fixed buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Upper bounds, in seconds, ascending.
    pub bounds: &'static [f64],
    /// Observations per bucket, not cumulative (`counts[i]` in `(bounds[i-1], bounds[i]]`);
    /// those above the last bound are only in `count`.
    pub counts: Vec<u64>,
    /// How many observations.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            count: 0,
            sum: 0.0,
        }
    }

    fn observe(&mut self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = self.bounds.iter().position(|&b| secs <= b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += secs;
    }

    /// `(upper bound, observations at or below it)` for each bucket.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.bounds
            .iter()
            .zip(&self.counts)
            .scan(0u64, |total, (&bound, &n)| {
                *total += n;
                Some((bound, *total))
            })
    }
}

/// The requests of one label set.
#[derive(Clone, Debug)]
struct RequestStats {
    by_code: HashMap<u16, u64>,
    duration: Histogram,
}

/// The counters, shared by the handlers, the store wrapper and the scrapes.
#[derive(Debug, Default)]
pub struct Telemetry {
    requests: Mutex<HashMap<RequestLabels, RequestStats>>,
    longrunning: Mutex<HashMap<RequestLabels, i64>>,
    store: Mutex<HashMap<(&'static str, String), Histogram>>,
    /// Events sent to watchers, by group, version and resource; each watch holds its counter.
    watch_events: Mutex<HashMap<(String, String, String), Arc<AtomicU64>>>,
}

/// One watch cache's figures at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheSnapshot {
    /// The resource's API group (`""` for core).
    pub group: String,
    /// The resource's plural.
    pub resource: String,
    /// Objects of the resource (as of `revision`).
    pub objects: u64,
    /// Recent events kept for watchers to resume from.
    pub events: u64,
    /// How many recent events may be kept.
    pub capacity: u64,
    /// Events the cache took from the store since it started.
    pub events_received: u64,
    /// The store revision the cache has reached.
    pub revision: u64,
    /// Bytes of served JSON the cache holds copies of.
    pub own_bytes: u64,
    /// Bytes of JSON the cache serves from the store's own values (the embedded store's).
    pub shared_bytes: u64,
}

/// A series' labels, `(name, value)` in kube-apiserver's order.
pub type Labels = Vec<(&'static str, String)>;

/// A copy of every counter at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// `(labels, code, requests)`.
    pub requests: Vec<(Labels, u16, u64)>,
    /// `(labels, durations)` (no code).
    pub durations: Vec<(Labels, Histogram)>,
    /// `(labels, open)` of long-running requests (watches).
    pub longrunning: Vec<(Labels, i64)>,
    /// `(operation, type, durations)` of store calls.
    pub store: Vec<(&'static str, String, Histogram)>,
    /// `(group, version, resource, events)` sent to watchers.
    pub watch_events: Vec<(String, String, String, u64)>,
    /// Every served resource's watch cache, by group and resource (one per group-resource).
    pub caches: Vec<CacheSnapshot>,
}

impl Telemetry {
    /// Records a request answered with `code` after `took`.
    pub(crate) fn request(&self, labels: &RequestLabels, code: u16, took: Duration) {
        let mut requests = self.requests.lock();
        let stats = requests
            .entry(labels.clone())
            .or_insert_with(|| RequestStats {
                by_code: HashMap::new(),
                duration: Histogram::new(REQUEST_BUCKETS),
            });
        *stats.by_code.entry(code).or_insert(0) += 1;
        stats.duration.observe(took);
    }

    /// Adds `delta` to the long-running requests of `labels`.
    fn longrunning(&self, labels: &RequestLabels, delta: i64) {
        *self.longrunning.lock().entry(labels.clone()).or_insert(0) += delta;
    }

    /// Records a store call.
    fn store_call(&self, operation: &'static str, kind: String, took: Duration) {
        self.store
            .lock()
            .entry((operation, kind))
            .or_insert_with(|| Histogram::new(STORE_BUCKETS))
            .observe(took);
    }

    /// The counter of events sent to watchers of one group, version and resource.
    pub(crate) fn watch_events(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Arc<AtomicU64> {
        self.watch_events
            .lock()
            .entry((group.to_owned(), version.to_owned(), resource.to_owned()))
            .or_default()
            .clone()
    }

    /// Every counter now, sorted by labels.
    pub fn snapshot(&self) -> Snapshot {
        let mut out = Snapshot::default();
        for (labels, stats) in self.requests.lock().iter() {
            let pairs = labels.pairs();
            for (&code, &n) in &stats.by_code {
                out.requests.push((pairs.clone(), code, n));
            }
            out.durations.push((pairs, stats.duration.clone()));
        }
        for (labels, &open) in self.longrunning.lock().iter() {
            out.longrunning.push((labels.pairs(), open));
        }
        for ((operation, kind), histogram) in self.store.lock().iter() {
            out.store.push((operation, kind.clone(), histogram.clone()));
        }
        for ((group, version, resource), n) in self.watch_events.lock().iter() {
            out.watch_events.push((
                group.clone(),
                version.clone(),
                resource.clone(),
                n.load(Ordering::Relaxed),
            ));
        }
        out.watch_events.sort();
        out.requests.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        out.durations.sort_by(|a, b| a.0.cmp(&b.0));
        out.longrunning.sort_by(|a, b| a.0.cmp(&b.0));
        out.store.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_should_count_each_duration_once_in_its_bucket() {
        let mut h = Histogram::new(REQUEST_BUCKETS);
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(30));
        h.observe(Duration::from_secs(100));
        let cumulative: Vec<(f64, u64)> = h.cumulative().take(3).collect();
        assert_eq!(cumulative, [(0.005, 1), (0.025, 1), (0.05, 2)]);
        assert_eq!(h.cumulative().last(), Some((60.0, 2)));
        assert_eq!(h.count, 3);
    }
}
