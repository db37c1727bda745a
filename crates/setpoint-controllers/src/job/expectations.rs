//! Writes a Job's sync made that the pod cache has not shown yet: pods created, pods deleted,
//! and tracking finalizers removed. While creates or deletes are outstanding the Job creates
//! and deletes nothing more; a pod whose finalizer removal is outstanding is never counted a
//! second time. The pod handler lowers the records as the cache catches up; a write that failed
//! is lowered by the sync itself. A record older than [`TIMEOUT`] counts as satisfied, so a
//! lost event delays a Job, never wedges it (kube-controller-manager's `ControllerExpectations`
//! and `uidTrackingExpectations`).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parking_lot::Mutex;
use setpoint_runtime::ObjectKey;
use tokio::time::Instant;

/// How long a record of creates and deletes is trusted.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Record {
    /// Pods created whose add the cache has not shown (≤ 0: none).
    adds: i64,
    /// Uids of pods deleted whose deletion the cache has not shown.
    deletes: HashSet<String>,
    /// Uids of pods whose tracking finalizer was removed, until the pod is gone.
    finalizers: HashSet<String>,
    /// When creates or deletes were last recorded.
    set_at: Instant,
}

impl Default for Record {
    fn default() -> Record {
        Record {
            adds: 0,
            deletes: HashSet::new(),
            finalizers: HashSet::new(),
            set_at: Instant::now(),
        }
    }
}

/// Outstanding writes, by Job key.
#[derive(Debug, Default)]
pub(crate) struct Expectations {
    records: Mutex<HashMap<ObjectKey, Record>>,
}

impl Expectations {
    /// Whether the Job may create or delete pods now.
    pub(crate) fn satisfied(&self, job: &ObjectKey) -> bool {
        self.records
            .lock()
            .get(job)
            .is_none_or(|r| (r.adds <= 0 && r.deletes.is_empty()) || r.set_at.elapsed() > TIMEOUT)
    }

    /// How long until an unsatisfied record of `job` expires.
    pub(crate) fn expires_in(&self, job: &ObjectKey) -> Option<Duration> {
        let records = self.records.lock();
        let r = records.get(job)?;
        TIMEOUT.checked_sub(r.set_at.elapsed())
    }

    /// `count` creates are about to be made.
    pub(crate) fn expect_creations(&self, job: &ObjectKey, count: usize) {
        let mut records = self.records.lock();
        let r = records.entry(job.clone()).or_default();
        r.adds = r.adds.max(0) + i64::try_from(count).unwrap_or(i64::MAX);
        r.set_at = Instant::now();
    }

    /// `count` creates will not show up (they failed, or were never made).
    pub(crate) fn lower_creations(&self, job: &ObjectKey, count: usize) {
        if let Some(r) = self.records.lock().get_mut(job) {
            r.adds -= i64::try_from(count).unwrap_or(i64::MAX);
        }
    }

    /// The pod with `uid` is about to be deleted.
    pub(crate) fn expect_deletion(&self, job: &ObjectKey, uid: &str) {
        let mut records = self.records.lock();
        let r = records.entry(job.clone()).or_default();
        r.deletes.insert(uid.to_owned());
        r.set_at = Instant::now();
    }

    /// The tracking finalizer of the pod with `uid` is about to be removed.
    pub(crate) fn expect_finalizer_removal(&self, job: &ObjectKey, uid: &str) {
        let mut records = self.records.lock();
        records
            .entry(job.clone())
            .or_default()
            .finalizers
            .insert(uid.to_owned());
    }

    /// Whether the finalizer removal of the pod with `uid` is outstanding.
    pub(crate) fn removing_finalizer(&self, job: &ObjectKey, uid: &str) -> bool {
        self.records
            .lock()
            .get(job)
            .is_some_and(|r| r.finalizers.contains(uid))
    }

    /// A pod of `job` appeared in the cache.
    pub(crate) fn creation_observed(&self, job: &ObjectKey) {
        if let Some(r) = self.records.lock().get_mut(job) {
            r.adds -= 1;
        }
    }

    /// The pod with `uid` is being deleted, or is gone.
    pub(crate) fn deletion_observed(&self, job: &ObjectKey, uid: &str) {
        if let Some(r) = self.records.lock().get_mut(job) {
            r.deletes.remove(uid);
        }
    }

    /// The pod with `uid` is gone (or its finalizer removal failed).
    pub(crate) fn finalizer_observed(&self, job: &ObjectKey, uid: &str) {
        if let Some(r) = self.records.lock().get_mut(job) {
            r.finalizers.remove(uid);
        }
    }

    /// Forgets a deleted Job.
    pub(crate) fn forget(&self, job: &ObjectKey) {
        self.records.lock().remove(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_and_deletes_should_block_until_observed() {
        let e = Expectations::default();
        let job = ObjectKey::namespaced("ns", "j");
        assert!(e.satisfied(&job));
        e.expect_creations(&job, 2);
        e.creation_observed(&job);
        assert!(!e.satisfied(&job));
        e.lower_creations(&job, 1);
        assert!(e.satisfied(&job));
        e.expect_deletion(&job, "u1");
        assert!(!e.satisfied(&job));
        e.deletion_observed(&job, "u1");
        assert!(e.satisfied(&job));
    }

    #[test]
    fn finalizer_removals_should_be_remembered_until_observed() {
        let e = Expectations::default();
        let job = ObjectKey::namespaced("ns", "j");
        e.expect_finalizer_removal(&job, "u1");
        assert!(e.removing_finalizer(&job, "u1"));
        assert!(e.satisfied(&job), "finalizer removals do not block creates");
        e.finalizer_observed(&job, "u1");
        assert!(!e.removing_finalizer(&job, "u1"));
    }
}
