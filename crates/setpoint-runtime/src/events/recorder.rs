//! The recorder handle and the background task that writes Events.
//!
//! [`EventRecorder::publish`] only puts the occurrence on a bounded queue (dropping and counting
//! it if the queue is full), so recording an Event never blocks or fails a reconcile. One task
//! per recorder takes occurrences off the queue in order, runs them through the correlator
//! (aggregation and spam filter) and does the API writes one at a time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Resource;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, Duration, Instant};

use super::correlator::{Correlator, Key, Limits, SeriesUpdate, Verdict};
use super::details::{EventDetails, Reporter};
use crate::micro_time::micro_time_now;
use crate::Client;

/// The API's limit on an Event's `note`, in bytes.
const NOTE_LIMIT: usize = 1024;
/// The API's limit on an object name.
const NAME_LIMIT: usize = 253;

/// Sizes and timings of an [`EventRecorder`]. The defaults follow client-go's recorder where it
/// has one: a 1000-occurrence queue, a spam burst of 25 Events per object refilled one per 5
/// minutes, a 4096-entry cache; aggregation over 6 minutes (kube-runtime's cache TTL, client-go's
/// events-API series window) with series counts written at most every 10 seconds per Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRecorderConfig {
    /// Occurrences waiting to be handled; beyond this [`EventRecorder::publish`] drops.
    pub queue_capacity: usize,
    /// Repeats of an event less than this long after the previous one join its series.
    pub aggregation_window: Duration,
    /// A series count is written at most this often per Event ([`EventRecorder::flush`]
    /// writes at once).
    pub series_update_interval: Duration,
    /// New Events per regarding object allowed at once.
    pub spam_burst: u32,
    /// One more new Event per regarding object is allowed after each such period.
    pub spam_refill: Duration,
    /// Events remembered for aggregation, and objects remembered by the spam filter (each;
    /// the least recently seen are forgotten first).
    pub cache_capacity: usize,
}

impl Default for EventRecorderConfig {
    fn default() -> Self {
        EventRecorderConfig {
            queue_capacity: 1000,
            aggregation_window: Duration::from_secs(6 * 60),
            series_update_interval: Duration::from_secs(10),
            spam_burst: 25,
            spam_refill: Duration::from_secs(5 * 60),
            cache_capacity: 4096,
        }
    }
}

/// A snapshot of an [`EventRecorder`]'s counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventRecorderMetrics {
    /// Calls to [`EventRecorder::publish`].
    pub published: u64,
    /// Events created in the API.
    pub created: u64,
    /// Occurrences counted into an existing Event's series instead of creating one.
    pub aggregated: u64,
    /// Series counts written (PATCHes of `series`).
    pub series_updates: u64,
    /// Occurrences dropped because the queue was full (or the recorder's task had ended).
    pub dropped_queue_full: u64,
    /// Occurrences dropped by the per-object spam filter.
    pub dropped_spam: u64,
    /// Creates and series updates the API refused or that failed in transit.
    pub failed_writes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    published: AtomicU64,
    created: AtomicU64,
    aggregated: AtomicU64,
    series_updates: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_spam: AtomicU64,
    failed_writes: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Records `events.k8s.io/v1` Events without ever blocking its caller. Cheap to clone; clones
/// share one queue and one background task, which ends (after writing pending series counts)
/// when the last clone is dropped.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use setpoint_runtime::{EventDetails, EventRecorder, Reporter};
/// # async fn example(client: setpoint_runtime::Client, cm: ConfigMap) {
/// let recorder = EventRecorder::new(client, Reporter::new("example.com/widgets", "widgets-0"));
/// recorder.publish_for(&cm, EventDetails::normal("Synced", "Reconcile").with_note("up to date"));
/// recorder.flush().await;
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct EventRecorder {
    queue: mpsc::Sender<Command>,
    counters: Arc<Counters>,
}

#[derive(Debug)]
enum Command {
    Publish(Box<Occurrence>),
    Flush(oneshot::Sender<()>),
}

/// One call to `publish`, stamped with when it happened.
#[derive(Debug)]
struct Occurrence {
    regarding: ObjectReference,
    details: EventDetails,
    when: MicroTime,
    at: Instant,
}

impl EventRecorder {
    /// A recorder with the default [`EventRecorderConfig`]. Spawns its task: call within a
    /// tokio runtime.
    pub fn new(client: Client, reporter: Reporter) -> EventRecorder {
        Self::with_config(client, reporter, EventRecorderConfig::default())
    }

    /// A recorder with `config`. Spawns its task: call within a tokio runtime.
    pub fn with_config(
        client: Client,
        reporter: Reporter,
        config: EventRecorderConfig,
    ) -> EventRecorder {
        let (queue, commands) = mpsc::channel(config.queue_capacity.max(1));
        let counters = Arc::new(Counters::default());
        let worker = Worker {
            client,
            reporter,
            correlator: Correlator::new(Limits {
                window: config.aggregation_window,
                update_interval: config.series_update_interval,
                burst: config.spam_burst,
                refill: config.spam_refill,
                capacity: config.cache_capacity,
            }),
            counters: counters.clone(),
            last_suffix: 0,
        };
        tokio::spawn(worker.run(commands));
        EventRecorder { queue, counters }
    }

    /// Records that `details` happened to the object `regarding`. Returns at once: the Event is
    /// written by the recorder's task, aggregated with repeats, or dropped (and counted) if the
    /// queue is full or the object exceeded its spam allowance.
    pub fn publish(&self, regarding: &ObjectReference, details: EventDetails) {
        bump(&self.counters.published);
        let occurrence = Box::new(Occurrence {
            regarding: regarding.clone(),
            details,
            when: micro_time_now(),
            at: Instant::now(),
        });
        if self.queue.try_send(Command::Publish(occurrence)).is_err() {
            bump(&self.counters.dropped_queue_full);
        }
    }

    /// [`publish`](Self::publish) about `object`.
    pub fn publish_for<K>(&self, object: &K, details: EventDetails)
    where
        K: Resource,
        K::DynamicType: Default,
    {
        self.publish(&object.object_ref(&K::DynamicType::default()), details);
    }

    /// Waits until everything published before this call has been handled and every pending
    /// series count has been written. Waits for room on the queue if it is full. Cancel-safe.
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.queue.send(Command::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> EventRecorderMetrics {
        let c = &self.counters;
        let read = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EventRecorderMetrics {
            published: read(&c.published),
            created: read(&c.created),
            aggregated: read(&c.aggregated),
            series_updates: read(&c.series_updates),
            dropped_queue_full: read(&c.dropped_queue_full),
            dropped_spam: read(&c.dropped_spam),
            failed_writes: read(&c.failed_writes),
        }
    }
}

/// The background task's state.
struct Worker {
    client: Client,
    reporter: Reporter,
    correlator: Correlator,
    counters: Arc<Counters>,
    /// The last Event name suffix used (nanoseconds since the epoch); each is larger than the
    /// one before, so this recorder never reuses a name.
    last_suffix: i64,
}

impl Worker {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        loop {
            let next_due = self.correlator.next_due();
            let command = tokio::select! {
                command = commands.recv() => command,
                _ = sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() => {
                    self.write_series(false).await;
                    continue;
                }
            };
            match command {
                Some(Command::Publish(occurrence)) => self.record(*occurrence).await,
                Some(Command::Flush(ack)) => {
                    self.write_series(true).await;
                    let _ = ack.send(());
                }
                None => {
                    self.write_series(true).await;
                    return;
                }
            }
        }
    }

    async fn record(&mut self, occurrence: Occurrence) {
        let key = Key::of(&occurrence.regarding, &occurrence.details);
        match self
            .correlator
            .observe(&key, &occurrence.when, occurrence.at)
        {
            Verdict::Aggregated => bump(&self.counters.aggregated),
            Verdict::Throttled => {
                bump(&self.counters.dropped_spam);
                tracing::debug!(reason = %occurrence.details.reason, "event dropped by the spam filter");
            }
            Verdict::New => match self.create(&occurrence).await {
                Ok((namespace, name)) => {
                    bump(&self.counters.created);
                    self.correlator
                        .created(key, namespace, name, occurrence.when, Instant::now());
                }
                Err(error) => {
                    bump(&self.counters.failed_writes);
                    tracing::warn!(%error, reason = %occurrence.details.reason, "creating an event failed");
                }
            },
        }
    }

    /// Creates the Event for `occurrence`; returns its namespace and name.
    async fn create(&mut self, occurrence: &Occurrence) -> Result<(String, String), kube::Error> {
        let regarding = &occurrence.regarding;
        let details = &occurrence.details;
        let namespace = regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let api = self.client.namespaced_api::<Event>(&namespace);
        let mut event = Event {
            metadata: ObjectMeta {
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(occurrence.when.clone()),
            regarding: Some(regarding.clone()),
            related: details.related.clone(),
            reason: Some(details.reason.clone()),
            action: Some(details.action.clone()),
            note: details
                .note
                .as_deref()
                .map(|n| truncate(n, NOTE_LIMIT).to_owned()),
            type_: Some(details.type_.as_str().to_owned()),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            ..Default::default()
        };
        // A name taken (by another recorder) gets one more try with a later suffix.
        let mut tries = 0;
        loop {
            let name = event_name(regarding.name.as_deref(), self.next_suffix());
            event.metadata.name = Some(name.clone());
            match api.create(&PostParams::default(), &event).await {
                Ok(_) => return Ok((namespace, name)),
                Err(kube::Error::Api(status)) if status.code == 409 && tries == 0 => tries += 1,
                Err(error) => return Err(error),
            }
        }
    }

    /// Writes pending series counts: those due, or all with `force`.
    async fn write_series(&mut self, force: bool) {
        for update in self.correlator.due(Instant::now(), force) {
            match self.patch_series(&update).await {
                Ok(()) => {
                    bump(&self.counters.series_updates);
                    self.correlator.written(&update, Instant::now());
                }
                Err(error) => {
                    bump(&self.counters.failed_writes);
                    let gone = matches!(&error, kube::Error::Api(s) if s.code == 404);
                    tracing::warn!(%error, event = %update.name, "updating an event series failed");
                    self.correlator.write_failed(&update, gone, Instant::now());
                }
            }
        }
    }

    async fn patch_series(&self, update: &SeriesUpdate) -> Result<(), kube::Error> {
        let patch = json!({
            "series": {
                "count": update.count,
                "lastObservedTime": update.last_observed,
            }
        });
        self.client
            .namespaced_api::<Event>(&update.namespace)
            .patch(&update.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    /// The current time in nanoseconds since the epoch, or one more than the last suffix.
    fn next_suffix(&mut self) -> i64 {
        let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
        self.last_suffix = now.max(self.last_suffix.saturating_add(1));
        self.last_suffix
    }
}

/// `<object name>.<suffix in hex>` (client-go's form), the object name cut to keep within the
/// API's name length limit.
fn event_name(object: Option<&str>, suffix: i64) -> String {
    let suffix = format!("{suffix:x}");
    let prefix = object.filter(|n| !n.is_empty()).unwrap_or("event");
    let prefix = truncate(prefix, NAME_LIMIT - 1 - suffix.len()).trim_end_matches(['.', '-']);
    format!("{prefix}.{suffix}")
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_name_should_join_object_and_hex_suffix_within_the_name_limit() {
        assert_eq!(event_name(Some("web"), 255), "web.ff");
        assert_eq!(event_name(None, 1), "event.1");
        let long = "a".repeat(300);
        let name = event_name(Some(&long), i64::MAX);
        assert_eq!(name.len(), NAME_LIMIT);
        assert!(name.ends_with(".7fffffffffffffff"));
    }

    #[test]
    fn truncate_should_cut_on_a_character_boundary() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("abcdef", 3), "abc");
        assert_eq!(truncate("aé", 2), "a");
        assert_eq!(truncate("aé", 3), "aé");
    }
}
