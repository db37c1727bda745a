//! Writes to ReplicaSets the cache has not shown yet. A Deployment's sync plans from the
//! ReplicaSet cache; acting on a cache that does not yet show the sync before's writes could
//! create a ReplicaSet twice or scale one down twice. So every create, update and delete of a
//! ReplicaSet is recorded here with the `resourceVersion` the server returned, and a
//! Deployment does not act again until the cache has shown each of them (or
//! [`EXPECTATION_TIMEOUT`] has passed, should an event be lost).
//!
//! An update counts as shown when the cached `resourceVersion` is the written one or a later
//! one: Setpoint's resource versions are increasing integers (Kubernetes' are opaque; for one
//! that does not parse, only the exact version counts).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use setpoint_runtime::ObjectKey;
use tokio::time::Instant;

/// How long a write may stay unobserved before it is no longer waited for.
pub(super) const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

/// What the cache should show of one ReplicaSet.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    /// This version (or a later one).
    Version(String),
    /// The ReplicaSet gone.
    Gone,
}

/// One write waiting to be observed.
#[derive(Debug, Clone)]
struct Pending {
    expected: Expected,
    /// When it is no longer waited for.
    deadline: Instant,
}

/// Unobserved ReplicaSet writes, by Deployment, then by ReplicaSet name. Entries are removed
/// when observed, when they expire (at the next check), or when the Deployment is forgotten.
#[derive(Debug, Default)]
pub(super) struct Expectations {
    pending: Mutex<HashMap<ObjectKey, HashMap<String, Pending>>>,
}

impl Expectations {
    /// Records that `deployment` wrote ReplicaSet `rs`, which the server now stores at
    /// `resource_version`.
    pub(super) fn expect_version(
        &self,
        deployment: &ObjectKey,
        rs: &str,
        resource_version: Option<&str>,
    ) {
        let Some(version) = resource_version else {
            return;
        };
        self.insert(deployment, rs, Expected::Version(version.to_owned()));
    }

    /// Records that `deployment` deleted ReplicaSet `rs`.
    pub(super) fn expect_gone(&self, deployment: &ObjectKey, rs: &str) {
        self.insert(deployment, rs, Expected::Gone);
    }

    fn insert(&self, deployment: &ObjectKey, rs: &str, expected: Expected) {
        let pending = Pending {
            expected,
            deadline: Instant::now() + EXPECTATION_TIMEOUT,
        };
        self.pending
            .lock()
            .entry(deployment.clone())
            .or_default()
            .insert(rs.to_owned(), pending);
    }

    /// The cache shows ReplicaSet `rs` of `deployment` at `resource_version`.
    pub(super) fn observed(
        &self,
        deployment: &ObjectKey,
        rs: &str,
        resource_version: Option<&str>,
    ) {
        let mut pending = self.pending.lock();
        let Some(of_deployment) = pending.get_mut(deployment) else {
            return;
        };
        let seen = match (of_deployment.get(rs), resource_version) {
            (
                Some(Pending {
                    expected: Expected::Version(want),
                    ..
                }),
                Some(have),
            ) => at_least(have, want),
            _ => false,
        };
        if seen {
            of_deployment.remove(rs);
        }
        if of_deployment.is_empty() {
            pending.remove(deployment);
        }
    }

    /// The cache shows ReplicaSet `rs` of `deployment` deleted.
    pub(super) fn observed_gone(&self, deployment: &ObjectKey, rs: &str) {
        let mut pending = self.pending.lock();
        if let Some(of_deployment) = pending.get_mut(deployment) {
            of_deployment.remove(rs);
            if of_deployment.is_empty() {
                pending.remove(deployment);
            }
        }
    }

    /// How long until every write of `deployment` is observed or expired: `None` if that is
    /// now (the Deployment may act). Drops expired entries.
    pub(super) fn wait_for(&self, deployment: &ObjectKey) -> Option<Duration> {
        let mut pending = self.pending.lock();
        let of_deployment = pending.get_mut(deployment)?;
        let now = Instant::now();
        of_deployment.retain(|_, p| p.deadline > now);
        let latest = of_deployment.values().map(|p| p.deadline).max();
        if of_deployment.is_empty() {
            pending.remove(deployment);
        }
        latest.map(|d| d - now)
    }

    /// Forgets a deleted Deployment.
    pub(super) fn forget(&self, deployment: &ObjectKey) {
        self.pending.lock().remove(deployment);
    }
}

/// Whether resource version `have` is `want` or later.
fn at_least(have: &str, want: &str) -> bool {
    match (have.parse::<u64>(), want.parse::<u64>()) {
        (Ok(have), Ok(want)) => have >= want,
        _ => have == want,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn writes_should_be_waited_for_until_observed() {
        let e = Expectations::default();
        let d = ObjectKey::namespaced("ns", "web");
        assert_eq!(e.wait_for(&d), None);
        e.expect_version(&d, "web-1", Some("10"));
        e.expect_gone(&d, "web-0");
        assert!(e.wait_for(&d).is_some());
        e.observed(&d, "web-1", Some("9"));
        assert!(
            e.wait_for(&d).is_some(),
            "an older version is not the write"
        );
        e.observed(&d, "web-1", Some("12"));
        e.observed(&d, "web-0", Some("99"));
        assert!(
            e.wait_for(&d).is_some(),
            "a deletion needs the ReplicaSet gone"
        );
        e.observed_gone(&d, "web-0");
        assert_eq!(e.wait_for(&d), None);
    }

    #[tokio::test(start_paused = true)]
    async fn unobserved_writes_should_expire() {
        let e = Expectations::default();
        let d = ObjectKey::namespaced("ns", "web");
        e.expect_version(&d, "web-1", Some("opaque"));
        e.observed(&d, "web-1", Some("other"));
        assert_eq!(e.wait_for(&d), Some(EXPECTATION_TIMEOUT));
        tokio::time::advance(EXPECTATION_TIMEOUT).await;
        assert_eq!(e.wait_for(&d), None);
    }
}
