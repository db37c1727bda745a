//! When a Job may create a pod again after failures: kube-controller-manager's pod-recreation
//! backoff. After `n` failures since the last success, the next pod waits `10 s × 2^(n-1)`
//! (at most six minutes) from the last failure. Derived from the pods themselves (their finish
//! times), so a restarted loop waits as long as the one before it would have. Indexed Jobs keep
//! one such count per index.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::pods::finish_time;

/// The delay after the first failure.
pub(crate) const BASE: Duration = Duration::from_secs(10);
/// The longest delay.
pub(crate) const MAX: Duration = Duration::from_secs(6 * 60);

/// The delay after `failures` failures in a row (none for none).
pub(crate) fn delay(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let shift = (failures - 1).min(16);
    BASE.saturating_mul(1 << shift).min(MAX)
}

/// How long from `now` until a pod may be created again, given the finished pods `finished`
/// (`(pod, failed)` pairs; failures the pod failure policy ignores left out). `None`: now.
pub(crate) fn wait(finished: &[(&Arc<Pod>, bool)], now: Timestamp) -> Option<Duration> {
    let mut times: Vec<(Timestamp, bool)> = finished
        .iter()
        .filter_map(|(p, failed)| Some((finish_time(p)?, *failed)))
        .collect();
    times.sort_by_key(|(t, _)| *t);
    let since_success: Vec<Timestamp> = times
        .iter()
        .rev()
        .take_while(|(_, failed)| *failed)
        .map(|(t, _)| *t)
        .collect();
    let last = *since_success.first()?;
    let failures = u32::try_from(since_success.len()).unwrap_or(u32::MAX);
    let d = SignedDuration::try_from(delay(failures)).unwrap_or(SignedDuration::MAX);
    let ready = last.checked_add(d).unwrap_or(Timestamp::MAX);
    (ready > now).then(|| Duration::try_from(ready.duration_since(now)).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::pods::testing::pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn finished_at(name: &str, s: i64) -> Arc<Pod> {
        let mut p = pod(name, "Failed");
        p.metadata.creation_timestamp = Some(Time(at(s)));
        Arc::new(p)
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).expect("valid")
    }

    #[test]
    fn delay_should_double_up_to_six_minutes() {
        assert_eq!(delay(0), Duration::ZERO);
        assert_eq!(delay(1), Duration::from_secs(10));
        assert_eq!(delay(3), Duration::from_secs(40));
        assert_eq!(delay(20), MAX);
    }

    #[test]
    fn wait_should_count_failures_since_the_last_success() {
        let (a, b, c) = (
            finished_at("a", 0),
            finished_at("b", 5),
            finished_at("c", 10),
        );
        // Two failures after a success: 20 s from the last one (t=10).
        let pods = [(&a, false), (&b, true), (&c, true)];
        assert_eq!(wait(&pods, at(15)), Some(Duration::from_secs(15)));
        assert_eq!(wait(&pods, at(31)), None);
        let pods = [(&a, true), (&b, true), (&c, false)];
        assert_eq!(wait(&pods, at(11)), None, "a success resets the count");
    }
}
