//! Expectations: the creates and deletes a ReplicaSet's last sync made that the pod cache has
//! not shown yet. While any are outstanding the loop does not create or delete pods for that
//! ReplicaSet, so a cache that lags behind its own writes never makes it create or delete
//! twice (kube-controller-manager's `ControllerExpectations`, with deletes tracked by pod key as
//! its `UIDTrackingControllerExpectations` does).
//!
//! A sync records what it is about to do ([`Expectations::expect_creations`],
//! [`Expectations::expect_deletions`]); the pod informer's handler lowers the record as it sees
//! the pods appear and go ([`Expectations::creation_observed`],
//! [`Expectations::deletion_observed`]); a write that failed, or was never made, is lowered by
//! the sync itself. A record older than [`EXPECTATIONS_TIMEOUT`] counts as satisfied, so a lost
//! event can delay a ReplicaSet by at most that long, never wedge it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parking_lot::Mutex;
use setpoint_runtime::ObjectKey;
use tokio::time::Instant;

/// How long a record is trusted: after this, the ReplicaSet is synced again even if some of
/// its writes were never observed (Kubernetes' `ExpectationsTimeout`).
pub(super) const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// What one ReplicaSet still waits to observe.
#[derive(Debug)]
struct Record {
    /// Pods created (or about to be) whose add the cache has not shown. May drop below zero
    /// when adds of pods created by an earlier, expired record arrive late; ≤ 0 means none.
    adds: i64,
    /// Keys of the pods being deleted whose deletion the cache has not shown.
    deletes: HashSet<ObjectKey>,
    /// When the record was set; it is trusted until `set_at + EXPECTATIONS_TIMEOUT`.
    set_at: Instant,
}

impl Record {
    fn fulfilled(&self) -> bool {
        self.adds <= 0 && self.deletes.is_empty()
    }
}

/// Outstanding creates and deletes, by ReplicaSet key. Shared by the sync and the pod handler.
#[derive(Debug, Default)]
pub(super) struct Expectations {
    /// One record per ReplicaSet that has synced since it was last forgotten.
    records: Mutex<HashMap<ObjectKey, Record>>,
}

impl Expectations {
    /// Whether the ReplicaSet may create or delete pods now: nothing is outstanding, the record
    /// has expired, or there is none (a ReplicaSet never synced by this process).
    pub(super) fn satisfied(&self, rs: &ObjectKey) -> bool {
        match self.records.lock().get(rs) {
            None => true,
            Some(record) => record.fulfilled() || record.set_at.elapsed() > EXPECTATIONS_TIMEOUT,
        }
    }

    /// How long until `rs`'s outstanding record expires and a sync may act regardless; `None`
    /// if nothing is outstanding.
    pub(super) fn expires_in(&self, rs: &ObjectKey) -> Option<Duration> {
        let records = self.records.lock();
        let record = records.get(rs).filter(|r| !r.fulfilled())?;
        Some(EXPECTATIONS_TIMEOUT.saturating_sub(record.set_at.elapsed()))
    }

    /// Records that `count` pods are about to be created for `rs` (replacing any record).
    pub(super) fn expect_creations(&self, rs: &ObjectKey, count: usize) {
        self.set(rs, count, HashSet::new());
    }

    /// Records that `pods` are about to be deleted for `rs` (replacing any record).
    pub(super) fn expect_deletions(
        &self,
        rs: &ObjectKey,
        pods: impl IntoIterator<Item = ObjectKey>,
    ) {
        self.set(rs, 0, pods.into_iter().collect());
    }

    fn set(&self, rs: &ObjectKey, adds: usize, deletes: HashSet<ObjectKey>) {
        let record = Record {
            adds: i64::try_from(adds).unwrap_or(i64::MAX),
            deletes,
            set_at: Instant::now(),
        };
        self.records.lock().insert(rs.clone(), record);
    }

    /// One pod controlled by `rs` appeared (or a planned create will never happen).
    pub(super) fn creation_observed(&self, rs: &ObjectKey) {
        self.lower_creations(rs, 1);
    }

    /// `count` planned creates for `rs` will never happen (they failed or were skipped).
    pub(super) fn lower_creations(&self, rs: &ObjectKey, count: usize) {
        if let Some(record) = self.records.lock().get_mut(rs) {
            record.adds = record
                .adds
                .saturating_sub(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// Pod `pod` of `rs` is gone or going (or its planned delete failed). Idempotent: only a
    /// pod the record waits for lowers it.
    pub(super) fn deletion_observed(&self, rs: &ObjectKey, pod: &ObjectKey) {
        if let Some(record) = self.records.lock().get_mut(rs) {
            record.deletes.remove(pod);
        }
    }

    /// Drops the record of a ReplicaSet that was deleted.
    pub(super) fn forget(&self, rs: &ObjectKey) {
        self.records.lock().remove(rs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs() -> ObjectKey {
        ObjectKey::namespaced("ns", "web")
    }

    #[test]
    fn expectations_should_be_satisfied_without_a_record() {
        assert!(Expectations::default().satisfied(&rs()));
    }

    #[test]
    fn expectations_should_wait_for_every_create_to_be_observed() {
        let e = Expectations::default();
        e.expect_creations(&rs(), 3);
        assert!(!e.satisfied(&rs()));
        e.creation_observed(&rs());
        e.creation_observed(&rs());
        assert!(!e.satisfied(&rs()), "one create still unseen");
        e.creation_observed(&rs());
        assert!(e.satisfied(&rs()));
    }

    #[test]
    fn expectations_should_count_failed_creates_as_observed() {
        let e = Expectations::default();
        e.expect_creations(&rs(), 7);
        e.creation_observed(&rs());
        e.lower_creations(&rs(), 6);
        assert!(e.satisfied(&rs()));
    }

    #[test]
    fn expectations_should_track_deletes_by_pod_and_ignore_other_pods() {
        let e = Expectations::default();
        let (a, b) = (
            ObjectKey::namespaced("ns", "a"),
            ObjectKey::namespaced("ns", "b"),
        );
        e.expect_deletions(&rs(), [a.clone(), b.clone()]);
        e.deletion_observed(&rs(), &a);
        e.deletion_observed(&rs(), &a);
        e.deletion_observed(&rs(), &ObjectKey::namespaced("ns", "other"));
        assert!(!e.satisfied(&rs()), "b's deletion is still unseen");
        e.deletion_observed(&rs(), &b);
        assert!(e.satisfied(&rs()));
    }

    #[test]
    fn expectations_should_be_per_replicaset_and_forgettable() {
        let e = Expectations::default();
        let other = ObjectKey::namespaced("ns", "api");
        e.expect_creations(&rs(), 1);
        e.creation_observed(&other);
        assert!(!e.satisfied(&rs()));
        assert!(e.satisfied(&other));
        e.forget(&rs());
        assert!(e.satisfied(&rs()));
    }

    #[tokio::test(start_paused = true)]
    async fn expectations_should_expire_after_five_minutes() {
        let e = Expectations::default();
        e.expect_creations(&rs(), 1);
        tokio::time::advance(EXPECTATIONS_TIMEOUT).await;
        assert!(!e.satisfied(&rs()), "not yet expired");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            e.satisfied(&rs()),
            "a lost event must not wedge the ReplicaSet"
        );
    }
}
