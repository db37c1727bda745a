//! Scoring: kube-scheduler's `NodeResourcesFit` with the `LeastAllocated` strategy, cpu and
//! memory weighted equally. A node scores, per resource, the share of its allocatable that
//! would stay free with the pod on it, from 0 to [`MAX_SCORE`]; the node's score is the mean.
//! Requests count with kube's non-zero defaults (100m, 200 MiB per container requesting none),
//! so pods without requests spread too. [`pick`] breaks ties round-robin.

use super::node_info::{NodeFacts, NodeInfo, PodInfo};

/// The best score a node can get (kube's `MaxNodeScore`).
pub(super) const MAX_SCORE: i64 = 100;

/// How free `node` would stay with `pod` on it: 0 (full) to [`MAX_SCORE`] (empty).
pub(super) fn least_allocated(node: &NodeInfo, facts: &NodeFacts, pod: &PodInfo) -> i64 {
    let cpu = free_share(
        facts.allocatable.cpu_milli,
        node.non_zero
            .cpu_milli
            .saturating_add(pod.request.non_zero.cpu_milli),
    );
    let memory = free_share(
        facts.allocatable.memory,
        node.non_zero
            .memory
            .saturating_add(pod.request.non_zero.memory),
    );
    (cpu + memory) / 2
}

/// `(capacity - requested) · MAX_SCORE / capacity`, 0 when nothing is left or there is no
/// capacity.
fn free_share(capacity: i64, requested: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    let free = i128::from(capacity - requested) * i128::from(MAX_SCORE) / i128::from(capacity);
    i64::try_from(free).unwrap_or(0)
}

/// The index of the best of `scores`, looking from `start` (wrapping) and keeping the first of
/// equals, so that successive calls with a moving `start` spread pods over equal nodes. `None`
/// if `scores` is empty.
pub(super) fn pick(scores: &[i64], start: usize) -> Option<usize> {
    let n = scores.len();
    let mut best: Option<usize> = None;
    for offset in 0..n {
        let i = (start + offset) % n;
        if best.is_none_or(|b| scores[i] > scores[b]) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::scheduler::node_info::testing::{info, node};
    use crate::scheduler::resources::testing::pod;
    use crate::scheduler::resources::NonZero;

    fn score(n: &NodeInfo, requests: &[(&str, &str)]) -> i64 {
        let p = PodInfo::of(Arc::new(pod("p", requests)));
        least_allocated(n, n.node.as_ref().expect("facts"), &p)
    }

    #[test]
    fn least_allocated_should_prefer_the_emptier_node() {
        let empty = info(node("a"));
        let mut half = info(node("b"));
        half.non_zero = NonZero {
            cpu_milli: 2_000,
            memory: 4 * 1024 * 1024 * 1024,
        };
        let req = [("cpu", "1"), ("memory", "2Gi")];
        assert_eq!(score(&empty, &req), 75, "(3/4 + 6/8) / 2 free");
        assert_eq!(score(&half, &req), 25);
    }

    #[test]
    fn least_allocated_should_score_zero_when_overcommitted_or_without_capacity() {
        let mut full = info(node("a"));
        full.non_zero.cpu_milli = 4_000;
        full.non_zero.memory = 8 * 1024 * 1024 * 1024;
        assert_eq!(score(&full, &[("cpu", "1"), ("memory", "1")]), 0);
        let mut bare = node("b");
        bare.status.as_mut().expect("status").allocatable = None;
        assert_eq!(score(&info(bare), &[]), 0);
    }

    #[test]
    fn least_allocated_should_count_defaults_for_pods_without_requests() {
        let empty = info(node("a"));
        assert!(score(&empty, &[]) < MAX_SCORE, "100m and 200Mi count");
    }

    #[test]
    fn pick_should_take_the_best_and_rotate_among_equals() {
        assert_eq!(pick(&[], 0), None);
        assert_eq!(pick(&[1, 5, 3], 0), Some(1));
        assert_eq!(pick(&[1, 5, 3], 2), Some(1));
        let equal = [7, 7, 7];
        let picked: Vec<_> = (0..3).map(|s| pick(&equal, s)).collect();
        assert_eq!(picked, [Some(0), Some(1), Some(2)]);
    }
}
