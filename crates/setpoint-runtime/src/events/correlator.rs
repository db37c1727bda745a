//! Decides what each occurrence of an event becomes — a new Event, one more count on an
//! existing Event's series, or nothing (spam) — and which series counts are due to be written.
//! Pure bookkeeping on the local clock, no I/O, so it is tested with paused time.
//!
//! Aggregation: occurrences with the same [`Key`] (regarding object, related object, type,
//! reason, action, note) while the previous one was seen less than the aggregation window ago
//! are one Event whose `series.count` grows. Series counts are written at most once per update
//! interval per Event (and all at once on flush), so a hot loop costs local counting, not API
//! writes.
//!
//! Spam: every *new* Event takes a token from its regarding object's bucket; without one the
//! occurrence is dropped. Occurrences folded into a series take no token.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::{Duration, Instant};

use super::details::{EventDetails, EventType};
use super::lru::Lru;
use super::spam::SpamFilter;

/// The parts of an object reference that name the object (not its `resourceVersion`, which
/// changes on every write and would defeat aggregation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ObjectId {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    field_path: Option<String>,
}

impl ObjectId {
    pub(crate) fn of(reference: &ObjectReference) -> ObjectId {
        ObjectId {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
            uid: reference.uid.clone(),
            field_path: reference.field_path.clone(),
        }
    }
}

/// What makes two occurrences the same Event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    regarding: ObjectId,
    related: Option<ObjectId>,
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
}

impl Key {
    pub(crate) fn of(regarding: &ObjectReference, details: &EventDetails) -> Key {
        Key {
            regarding: ObjectId::of(regarding),
            related: details.related.as_ref().map(ObjectId::of),
            type_: details.type_,
            reason: details.reason.clone(),
            action: details.action.clone(),
            note: details.note.clone(),
        }
    }
}

/// An Event in the API and the occurrences it stands for.
#[derive(Clone, Debug)]
struct Series {
    /// The Event's name and namespace.
    name: String,
    namespace: String,
    /// Occurrences so far (≥ 1).
    count: i32,
    /// Occurrences the API knows of (≤ `count`); less than `count` iff the key is dirty.
    written: i32,
    /// Wall-clock time of the latest occurrence.
    last_observed: MicroTime,
    /// Local time of the latest occurrence (aggregation window).
    last_seen: Instant,
    /// Local time of the latest write (or failed write) of this Event.
    written_at: Instant,
}

/// What an occurrence became.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Create a new Event, then report it with [`Correlator::created`].
    New,
    /// Counted into an existing Event's series.
    Aggregated,
    /// Dropped by the spam filter.
    Throttled,
}

/// A series count to write.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SeriesUpdate {
    pub(crate) key: Key,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) count: i32,
    pub(crate) last_observed: MicroTime,
}

/// Timings and sizes of a [`Correlator`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) window: Duration,
    pub(crate) update_interval: Duration,
    pub(crate) burst: u32,
    pub(crate) refill: Duration,
    pub(crate) capacity: usize,
}

#[derive(Debug)]
pub(crate) struct Correlator {
    /// Live Events by key, least recently seen evicted first.
    series: Lru<Key, Series>,
    /// Keys of `series` with occurrences the API does not know of yet.
    dirty: HashSet<Key>,
    spam: SpamFilter<ObjectId>,
    limits: Limits,
}

impl Correlator {
    pub(crate) fn new(limits: Limits) -> Correlator {
        Correlator {
            series: Lru::new(limits.capacity),
            dirty: HashSet::new(),
            spam: SpamFilter::new(limits.burst, limits.refill, limits.capacity),
            limits,
        }
    }

    /// Judges one occurrence of `key`, seen at `now` (wall clock `when`).
    pub(crate) fn observe(&mut self, key: &Key, when: &MicroTime, now: Instant) -> Verdict {
        let window = self.limits.window;
        if let Some(series) = self.series.get_mut(key) {
            if now < series.last_seen + window {
                series.count = series.count.saturating_add(1);
                series.last_observed = when.clone();
                series.last_seen = now;
                self.dirty.insert(key.clone());
                return Verdict::Aggregated;
            }
            self.forget(key);
        }
        if self.spam.allow(&key.regarding, now) {
            Verdict::New
        } else {
            Verdict::Throttled
        }
    }

    /// Records that the Event for `key` was created as `namespace/name`.
    pub(crate) fn created(
        &mut self,
        key: Key,
        namespace: String,
        name: String,
        when: MicroTime,
        now: Instant,
    ) {
        let series = Series {
            name,
            namespace,
            count: 1,
            written: 1,
            last_observed: when,
            last_seen: now,
            written_at: now,
        };
        self.dirty.remove(&key);
        if let Some((evicted, _)) = self.series.insert(key, series) {
            self.dirty.remove(&evicted);
        }
    }

    /// Series counts to write at `now`: those whose update interval has passed since their last
    /// write, or all of them with `force`.
    pub(crate) fn due(&self, now: Instant, force: bool) -> Vec<SeriesUpdate> {
        self.dirty
            .iter()
            .filter_map(|key| {
                let series = self.series.peek(key)?;
                let due = force || series.written_at + self.limits.update_interval <= now;
                due.then(|| SeriesUpdate {
                    key: key.clone(),
                    name: series.name.clone(),
                    namespace: series.namespace.clone(),
                    count: series.count,
                    last_observed: series.last_observed.clone(),
                })
            })
            .collect()
    }

    /// When the next series count falls due, if any is pending.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.dirty
            .iter()
            .filter_map(|key| self.series.peek(key))
            .map(|series| series.written_at + self.limits.update_interval)
            .min()
    }

    /// Records that `update` was written at `now`.
    pub(crate) fn written(&mut self, update: &SeriesUpdate, now: Instant) {
        if let Some(series) = self.series.get_mut(&update.key) {
            series.written = series.written.max(update.count);
            series.written_at = now;
            if series.written >= series.count {
                self.dirty.remove(&update.key);
            }
        }
    }

    /// Records that writing `update` failed at `now`: retried after the update interval, or,
    /// if the Event is `gone` from the API, forgotten (the next occurrence creates a new one).
    pub(crate) fn write_failed(&mut self, update: &SeriesUpdate, gone: bool, now: Instant) {
        if gone {
            self.forget(&update.key);
        } else if let Some(series) = self.series.get_mut(&update.key) {
            series.written_at = now;
        }
    }

    fn forget(&mut self, key: &Key) {
        self.series.remove(key);
        self.dirty.remove(key);
    }

    #[cfg(test)]
    fn count(&self, key: &Key) -> Option<(i32, i32)> {
        self.series.peek(key).map(|s| (s.count, s.written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::details::EventDetails;
    use tokio::time::advance;

    fn limits() -> Limits {
        Limits {
            window: Duration::from_secs(360),
            update_interval: Duration::from_secs(10),
            burst: 25,
            refill: Duration::from_secs(300),
            capacity: 64,
        }
    }

    fn pod(name: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(name.into()),
            resource_version: Some("1".into()),
            ..Default::default()
        }
    }

    fn key(name: &str, reason: &str) -> Key {
        Key::of(&pod(name), &EventDetails::normal(reason, "Reconcile"))
    }

    fn when() -> MicroTime {
        crate::micro_time::micro_time_now()
    }

    #[tokio::test(start_paused = true)]
    async fn correlator_should_fold_repeats_into_one_series_and_write_it_once_due() {
        let mut c = Correlator::new(limits());
        let k = key("p", "Started");
        assert_eq!(c.observe(&k, &when(), Instant::now()), Verdict::New);
        c.created(
            k.clone(),
            "default".into(),
            "p.1".into(),
            when(),
            Instant::now(),
        );
        for _ in 0..49 {
            assert_eq!(c.observe(&k, &when(), Instant::now()), Verdict::Aggregated);
        }
        assert_eq!(c.count(&k), Some((50, 1)));
        assert!(
            c.due(Instant::now(), false).is_empty(),
            "not before the interval"
        );
        assert_eq!(c.next_due(), Some(Instant::now() + Duration::from_secs(10)));

        advance(Duration::from_secs(10)).await;
        let due = c.due(Instant::now(), false);
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].name.as_str(), due[0].count), ("p.1", 50));
        c.written(&due[0], Instant::now());
        assert_eq!(c.next_due(), None);
        assert_eq!(c.count(&k), Some((50, 50)));
    }

    #[tokio::test(start_paused = true)]
    async fn correlator_should_start_a_new_event_after_the_window() {
        let mut c = Correlator::new(limits());
        let k = key("p", "Started");
        assert_eq!(c.observe(&k, &when(), Instant::now()), Verdict::New);
        c.created(
            k.clone(),
            "default".into(),
            "p.1".into(),
            when(),
            Instant::now(),
        );
        advance(Duration::from_secs(359)).await;
        assert_eq!(c.observe(&k, &when(), Instant::now()), Verdict::Aggregated);
        // The window slides with each occurrence.
        advance(Duration::from_secs(359)).await;
        assert_eq!(c.observe(&k, &when(), Instant::now()), Verdict::Aggregated);
        advance(Duration::from_secs(360)).await;
        assert_eq!(c.observe(&k, &when(), Instant::now()), Verdict::New);
        assert_eq!(c.count(&k), None, "old series forgotten");
        assert_eq!(c.next_due(), None, "with its pending count");
    }

    #[tokio::test(start_paused = true)]
    async fn correlator_should_ignore_resource_version_and_tell_apart_other_fields() {
        let mut c = Correlator::new(limits());
        let k = key("p", "Started");
        c.created(
            k.clone(),
            "default".into(),
            "p.1".into(),
            when(),
            Instant::now(),
        );
        let mut newer = pod("p");
        newer.resource_version = Some("2".into());
        let same = Key::of(&newer, &EventDetails::normal("Started", "Reconcile"));
        assert_eq!(
            c.observe(&same, &when(), Instant::now()),
            Verdict::Aggregated
        );
        for other in [
            Key::of(&pod("p"), &EventDetails::warning("Started", "Reconcile")),
            Key::of(&pod("p"), &EventDetails::normal("Started", "Other")),
            Key::of(
                &pod("p"),
                &EventDetails::normal("Started", "Reconcile").with_note("n"),
            ),
            key("q", "Started"),
        ] {
            assert_eq!(c.observe(&other, &when(), Instant::now()), Verdict::New);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn correlator_should_throttle_new_events_per_object_but_not_repeats() {
        let mut c = Correlator::new(limits());
        let mut created = 0;
        for i in 0..100 {
            let k = key("p", &format!("Reason{i}"));
            if c.observe(&k, &when(), Instant::now()) == Verdict::New {
                created += 1;
                c.created(
                    k,
                    "default".into(),
                    format!("p.{i}"),
                    when(),
                    Instant::now(),
                );
            }
        }
        assert_eq!(created, 25);
        // Repeats of an existing Event still count.
        let first = key("p", "Reason0");
        assert_eq!(
            c.observe(&first, &when(), Instant::now()),
            Verdict::Aggregated
        );
        // Another object is unaffected.
        assert_eq!(
            c.observe(&key("q", "Reason0"), &when(), Instant::now()),
            Verdict::New
        );
        advance(Duration::from_secs(300)).await;
        assert_eq!(
            c.observe(&key("p", "Later"), &when(), Instant::now()),
            Verdict::New
        );
    }

    #[tokio::test(start_paused = true)]
    async fn correlator_should_stay_within_its_capacity_and_forget_gone_events() {
        let mut c = Correlator::new(Limits {
            capacity: 4,
            ..limits()
        });
        for i in 0..10 {
            let k = key(&format!("p{i}"), "Started");
            assert_eq!(c.observe(&k, &when(), Instant::now()), Verdict::New);
            c.created(
                k.clone(),
                "default".into(),
                format!("p{i}.1"),
                when(),
                Instant::now(),
            );
            c.observe(&k, &when(), Instant::now());
        }
        assert!(c.series.len() <= 4);
        assert_eq!(
            c.due(Instant::now(), true).len(),
            4,
            "dirty keys of evicted series dropped"
        );

        let update = c.due(Instant::now(), true).remove(0);
        c.write_failed(&update, true, Instant::now());
        assert_eq!(c.due(Instant::now(), true).len(), 3);
        assert_eq!(
            c.observe(&update.key, &when(), Instant::now()),
            Verdict::New
        );
    }
}
