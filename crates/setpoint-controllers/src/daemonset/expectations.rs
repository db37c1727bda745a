//! Expectations: the pod creates and deletes a DaemonSet's last sync made that the pod cache
//! has not shown yet. Its pods get generated names, so a sync acting on a cache that has not
//! caught up would create a second pod on a node; while anything is outstanding the loop
//! writes no pods for that DaemonSet. A record older than [`TIMEOUT`] counts as met, so a lost
//! event delays a DaemonSet, never wedges it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parking_lot::Mutex;
use setpoint_runtime::ObjectKey;
use tokio::time::Instant;

/// How long a record is trusted (Kubernetes' `ExpectationsTimeout`).
const TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Record {
    /// Creates not yet seen (≤ 0: none).
    adds: i64,
    /// Pods being deleted whose deletion has not been seen.
    deletes: HashSet<ObjectKey>,
    set_at: Instant,
}

/// Outstanding writes by DaemonSet key, shared by the sync and the pod handler.
#[derive(Debug, Default)]
pub(super) struct Expectations {
    records: Mutex<HashMap<ObjectKey, Record>>,
}

impl Expectations {
    /// Whether `ds` may write pods now.
    pub(super) fn satisfied(&self, ds: &ObjectKey) -> bool {
        self.records
            .lock()
            .get(ds)
            .is_none_or(|r| (r.adds <= 0 && r.deletes.is_empty()) || r.set_at.elapsed() > TIMEOUT)
    }

    /// How long until `ds`'s outstanding record expires, if one is outstanding.
    pub(super) fn expires_in(&self, ds: &ObjectKey) -> Option<Duration> {
        let records = self.records.lock();
        let r = records
            .get(ds)
            .filter(|r| r.adds > 0 || !r.deletes.is_empty())?;
        Some(TIMEOUT.saturating_sub(r.set_at.elapsed()))
    }

    /// Records that `adds` pods are about to be created and `deletes` deleted for `ds`
    /// (replacing any record).
    pub(super) fn expect(
        &self,
        ds: &ObjectKey,
        adds: usize,
        deletes: impl IntoIterator<Item = ObjectKey>,
    ) {
        let record = Record {
            adds: i64::try_from(adds).unwrap_or(i64::MAX),
            deletes: deletes.into_iter().collect(),
            set_at: Instant::now(),
        };
        self.records.lock().insert(ds.clone(), record);
    }

    /// `count` creates for `ds` were seen (or will never happen).
    pub(super) fn creations_observed(&self, ds: &ObjectKey, count: usize) {
        if let Some(r) = self.records.lock().get_mut(ds) {
            r.adds = r
                .adds
                .saturating_sub(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// `pod` of `ds` is gone or going (or its delete failed).
    pub(super) fn deletion_observed(&self, ds: &ObjectKey, pod: &ObjectKey) {
        if let Some(r) = self.records.lock().get_mut(ds) {
            r.deletes.remove(pod);
        }
    }

    /// Drops the record of a deleted DaemonSet.
    pub(super) fn forget(&self, ds: &ObjectKey) {
        self.records.lock().remove(ds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expectations_should_wait_for_writes_then_expire() {
        let e = Expectations::default();
        let ds = ObjectKey::namespaced("ns", "agent");
        let pod = ObjectKey::namespaced("ns", "agent-x");
        assert!(e.satisfied(&ds));
        e.expect(&ds, 2, [pod.clone()]);
        e.creations_observed(&ds, 2);
        assert!(!e.satisfied(&ds), "the delete is unseen");
        e.deletion_observed(&ds, &pod);
        assert!(e.satisfied(&ds));
        e.expect(&ds, 1, []);
        tokio::time::advance(TIMEOUT + Duration::from_millis(1)).await;
        assert!(
            e.satisfied(&ds),
            "a lost event must not wedge the DaemonSet"
        );
        e.forget(&ds);
        assert_eq!(e.expires_in(&ds), None);
    }
}
