//! API Priority and Fairness' figures for `/metrics`, under kube-apiserver's names:
//! `apiserver_flowcontrol_current_inqueue_requests`, `…_current_executing_requests`,
//! `…_rejected_requests_total` (with `reason`) and `…_request_wait_duration_seconds` (with
//! `execute`), each by `priority_level` and `flow_schema`. The gauges are kept by guards, so a
//! cancelled request is taken off them too.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::telemetry::Histogram;

/// kube-apiserver's buckets for the queue wait, in seconds.
const WAIT_BUCKETS: &[f64] = &[
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];

/// `(priority_level, flow_schema)`.
type Key = (String, String);

/// What `/metrics` shows of API Priority and Fairness.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct FlowControlFigures {
    /// Requests waiting in a queue, by `(priority_level, flow_schema)`.
    pub inqueue: Vec<(String, String, i64)>,
    /// Requests executing, by `(priority_level, flow_schema)`.
    pub executing: Vec<(String, String, i64)>,
    /// Requests refused, by `(priority_level, flow_schema, reason)`.
    pub rejected: Vec<(String, String, String, u64)>,
    /// Time spent waiting, by `(priority_level, flow_schema, execute)`.
    pub waits: Vec<(String, String, bool, Histogram)>,
    /// Each level's concurrency limit (`apiserver_flowcontrol_nominal_limit_seats`).
    pub limits: Vec<(String, u64)>,
}

#[derive(Debug, Default)]
struct Inner {
    inqueue: BTreeMap<Key, i64>,
    executing: BTreeMap<Key, i64>,
    rejected: BTreeMap<(String, String, &'static str), u64>,
    waits: BTreeMap<(String, String, bool), Histogram>,
}

/// The counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    inner: Mutex<Inner>,
}

/// Which gauge a [`Gauge`] holds one unit of.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Which {
    InQueue,
    Executing,
}

/// One unit of a gauge, given back when dropped.
#[derive(Debug)]
pub(crate) struct Gauge {
    metrics: Arc<Metrics>,
    which: Which,
    key: Key,
}

impl Drop for Gauge {
    fn drop(&mut self) {
        self.metrics.add(self.which, &self.key, -1);
    }
}

impl Metrics {
    fn add(&self, which: Which, key: &Key, delta: i64) {
        let mut inner = self.inner.lock();
        let map = match which {
            Which::InQueue => &mut inner.inqueue,
            Which::Executing => &mut inner.executing,
        };
        *map.entry(key.clone()).or_default() += delta;
    }

    /// Counts one request on `which` until the returned guard is dropped.
    pub(crate) fn hold(self: &Arc<Self>, which: Which, level: &str, schema: &str) -> Gauge {
        let key = (level.to_owned(), schema.to_owned());
        self.add(which, &key, 1);
        Gauge {
            metrics: self.clone(),
            which,
            key,
        }
    }

    pub(crate) fn rejected(&self, level: &str, schema: &str, reason: &'static str) {
        *self
            .inner
            .lock()
            .rejected
            .entry((level.to_owned(), schema.to_owned(), reason))
            .or_default() += 1;
    }

    pub(crate) fn waited(&self, level: &str, schema: &str, executed: bool, took: Duration) {
        let mut inner = self.inner.lock();
        let h = inner
            .waits
            .entry((level.to_owned(), schema.to_owned(), executed))
            .or_insert_with(|| Histogram {
                bounds: WAIT_BUCKETS,
                counts: vec![0; WAIT_BUCKETS.len()],
                count: 0,
                sum: 0.0,
            });
        let secs = took.as_secs_f64();
        if let Some(i) = h.bounds.iter().position(|&b| secs <= b) {
            h.counts[i] += 1;
        }
        h.count += 1;
        h.sum += secs;
    }

    pub(crate) fn figures(&self, limits: Vec<(String, u64)>) -> FlowControlFigures {
        let inner = self.inner.lock();
        let flat = |m: &BTreeMap<Key, i64>| {
            m.iter()
                .map(|((l, s), n)| (l.clone(), s.clone(), *n))
                .collect()
        };
        FlowControlFigures {
            inqueue: flat(&inner.inqueue),
            executing: flat(&inner.executing),
            rejected: inner
                .rejected
                .iter()
                .map(|((l, s, r), n)| (l.clone(), s.clone(), (*r).to_owned(), *n))
                .collect(),
            waits: inner
                .waits
                .iter()
                .map(|((l, s, e), h)| (l.clone(), s.clone(), *e, h.clone()))
                .collect(),
            limits,
        }
    }
}
