//! The leader-election record kept in a Lease's spec, and what a candidate concludes from it.
//!
//! Expiry is judged the way client-go judges it: by when *this* candidate saw the record change,
//! on its own monotonic clock, plus the record's `leaseDurationSeconds` — never by comparing
//! `renewTime` with the local wall clock, so clock skew between machines does not matter. The
//! wall-clock `MicroTime`s written into the Lease are for people and other tools.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::{Duration, Instant};

/// What this candidate last saw of the Lease.
#[derive(Clone, Debug)]
pub(crate) struct Observation {
    /// The Lease as last read or written: its `resourceVersion` is the precondition of our next
    /// update, so a write racing another candidate's fails with a conflict instead of winning.
    lease: Lease,
    /// When the record (the spec) was last seen to change, on the local monotonic clock.
    changed_at: Instant,
}

/// Who holds the Lease, as far as this candidate can tell at a given instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// This candidate.
    Us,
    /// Another candidate, whose record has not yet expired.
    Other(String),
    /// Nobody: no holder, or a holder whose record expired.
    Nobody,
}

impl Observation {
    /// Records `lease` as seen at `now`. The change time moves only if the record differs from
    /// the one seen before.
    pub(crate) fn observe(previous: Option<&Observation>, lease: Lease, now: Instant) -> Self {
        let changed_at = match previous {
            Some(prev) if prev.lease.spec == lease.spec => prev.changed_at,
            _ => now,
        };
        Observation { lease, changed_at }
    }

    /// The Lease as last seen.
    pub(crate) fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The record, if the Lease has a spec.
    pub(crate) fn spec(&self) -> Option<&LeaseSpec> {
        self.lease.spec.as_ref()
    }

    /// The recorded holder, if any (an empty identity counts as none).
    pub(crate) fn holder_identity(&self) -> Option<&str> {
        self.spec()
            .and_then(|s| s.holder_identity.as_deref())
            .filter(|h| !h.is_empty())
    }

    /// When other candidates may consider this record expired: its change time plus its
    /// `leaseDurationSeconds` (a missing or non-positive duration expires at once).
    pub(crate) fn expires_at(&self) -> Instant {
        let secs = self
            .spec()
            .and_then(|s| s.lease_duration_seconds)
            .unwrap_or(0)
            .max(0);
        self.changed_at + Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// Who holds the Lease at `now`, from `identity`'s point of view.
    pub(crate) fn holder(&self, identity: &str, now: Instant) -> Holder {
        match self.holder_identity() {
            Some(h) if h == identity => Holder::Us,
            Some(h) if now < self.expires_at() => Holder::Other(h.to_owned()),
            _ => Holder::Nobody,
        }
    }

    /// The record's `leaseTransitions`.
    pub(crate) fn transitions(&self) -> i32 {
        self.spec().and_then(|s| s.lease_transitions).unwrap_or(0)
    }
}

/// The record `identity` writes to take or keep the Lease. Keeping it (the record already names
/// `identity`) preserves `acquireTime` and `leaseTransitions`; taking it from anyone else
/// (including nobody, after a release) counts one more transition. Fields this module does not
/// manage (`preferredHolder`, `strategy`) are kept.
pub(crate) fn claimed_spec(
    previous: Option<&LeaseSpec>,
    identity: &str,
    lease_duration_seconds: i32,
    now: MicroTime,
) -> LeaseSpec {
    let mut spec = previous.cloned().unwrap_or_default();
    let keeping = previous.and_then(|p| p.holder_identity.as_deref()) == Some(identity);
    if !keeping {
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(match previous {
            Some(p) => p.lease_transitions.unwrap_or(0).saturating_add(1),
            None => 0,
        });
    }
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(lease_duration_seconds);
    spec.renew_time = Some(now);
    spec
}

/// The record a leader writes when it steps down: no holder, and a one-second duration, so a
/// candidate that still reads the old holder waits at most a second.
pub(crate) fn released_spec(previous: &LeaseSpec, now: MicroTime) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        ..previous.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::micro_time::micro_time_now;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn lease(holder: Option<&str>, duration: i32, rv: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some("lock".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(duration),
                ..Default::default()
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn observation_should_judge_expiry_from_when_the_record_last_changed() {
        let t0 = Instant::now();
        let seen = Observation::observe(None, lease(Some("b"), 2, "1"), t0);
        assert_eq!(seen.holder("a", t0), Holder::Other("b".into()));

        // The same record seen again later (only the resourceVersion moved): the clock keeps
        // running from the first sighting, so it expires 2 s after that.
        tokio::time::advance(Duration::from_millis(1500)).await;
        let again = Observation::observe(Some(&seen), lease(Some("b"), 2, "2"), Instant::now());
        assert_eq!(again.holder("a", Instant::now()), Holder::Other("b".into()));
        tokio::time::advance(Duration::from_millis(600)).await;
        assert_eq!(again.holder("a", Instant::now()), Holder::Nobody);

        // A changed record (renewed by b) restarts the clock.
        let mut renewed = lease(Some("b"), 2, "3");
        if let Some(spec) = renewed.spec.as_mut() {
            spec.renew_time = Some(micro_time_now());
        }
        let fresh = Observation::observe(Some(&again), renewed, Instant::now());
        assert_eq!(fresh.holder("a", Instant::now()), Holder::Other("b".into()));
    }

    #[tokio::test(start_paused = true)]
    async fn observation_should_see_an_empty_holder_as_nobody_and_its_own_name_as_us() {
        let now = Instant::now();
        let empty = Observation::observe(None, lease(Some(""), 15, "1"), now);
        assert_eq!(empty.holder("a", now), Holder::Nobody);
        let none = Observation::observe(None, lease(None, 15, "1"), now);
        assert_eq!(none.holder("a", now), Holder::Nobody);
        let ours = Observation::observe(None, lease(Some("a"), 15, "1"), now);
        assert_eq!(ours.holder("a", now), Holder::Us);
    }

    #[test]
    fn claiming_should_count_a_transition_only_when_the_holder_changes() {
        let t1 = micro_time_now();
        let created = claimed_spec(None, "a", 15, t1.clone());
        assert_eq!(created.lease_transitions, Some(0));
        assert_eq!(created.acquire_time.as_ref(), Some(&t1));

        let t2 = micro_time_now();
        let renewed = claimed_spec(Some(&created), "a", 15, t2.clone());
        assert_eq!(renewed.lease_transitions, Some(0));
        assert_eq!(renewed.acquire_time.as_ref(), Some(&t1));
        assert_eq!(renewed.renew_time.as_ref(), Some(&t2));

        let taken = claimed_spec(Some(&renewed), "b", 15, t2.clone());
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.holder_identity.as_deref(), Some("b"));
        assert_eq!(taken.acquire_time.as_ref(), Some(&t2));

        let released = released_spec(&taken, micro_time_now());
        assert_eq!(released.holder_identity, None);
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.lease_transitions, Some(1));
        let retaken = claimed_spec(Some(&released), "b", 15, micro_time_now());
        assert_eq!(retaken.lease_transitions, Some(2));
    }
}
