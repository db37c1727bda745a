//! The arithmetic of a rollout: the strategy, `maxSurge` and `maxUnavailable` resolved against
//! the replica count (an integer, or a percentage — surge rounded up, unavailable rounded down;
//! if both come to 0, one pod may be unavailable, as Kubernetes' `ResolveFenceposts` does), how
//! far the new ReplicaSet may grow, and how a change of `spec.replicas` in the middle of a
//! rollout is shared among the ReplicaSets in proportion to their size.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::annotations::max_replicas_annotation;
use super::replicasets::{desired, spec_replicas, sum_spec};

/// The default `maxSurge` and `maxUnavailable`.
const DEFAULT_FENCEPOST: &str = "25%";

/// How a Deployment replaces its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    /// Kill every old pod, then create the new ones.
    Recreate,
    /// Replace pods a few at a time.
    RollingUpdate {
        /// Pods that may exist beyond `spec.replicas`.
        max_surge: i32,
        /// Pods of `spec.replicas` that may be unavailable.
        max_unavailable: i32,
    },
}

impl Strategy {
    /// `d`'s strategy, with its fenceposts resolved against `spec.replicas`.
    pub(super) fn of(d: &Deployment) -> Strategy {
        let strategy = d.spec.as_ref().and_then(|s| s.strategy.as_ref());
        if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
            return Strategy::Recreate;
        }
        let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
        let default = IntOrString::String(DEFAULT_FENCEPOST.into());
        let surge = rolling
            .and_then(|r| r.max_surge.as_ref())
            .unwrap_or(&default);
        let unavailable = rolling
            .and_then(|r| r.max_unavailable.as_ref())
            .unwrap_or(&default);
        let replicas = desired(d);
        let max_surge = scaled(surge, replicas, Rounding::Up);
        let mut max_unavailable = scaled(unavailable, replicas, Rounding::Down);
        if max_surge == 0 && max_unavailable == 0 {
            max_unavailable = 1;
        }
        Strategy::RollingUpdate {
            max_surge,
            max_unavailable,
        }
    }

    /// Pods that may exist beyond `spec.replicas` (0 for Recreate).
    pub(super) fn max_surge(self) -> i32 {
        match self {
            Strategy::Recreate => 0,
            Strategy::RollingUpdate { max_surge, .. } => max_surge,
        }
    }
}

/// `maxSurge` of `d` (Kubernetes' `MaxSurge`).
pub(super) fn max_surge(d: &Deployment) -> i32 {
    Strategy::of(d).max_surge()
}

/// `maxUnavailable` of `d`, never more than `spec.replicas` (0 for Recreate or no replicas;
/// Kubernetes' `MaxUnavailable`).
pub(super) fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = desired(d);
    match Strategy::of(d) {
        Strategy::RollingUpdate {
            max_unavailable, ..
        } if replicas > 0 => max_unavailable.min(replicas),
        _ => 0,
    }
}

/// Which way a percentage is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    Up,
    Down,
}

/// An int-or-percent against `total`. A malformed percentage counts as 0 (the server
/// validates them).
fn scaled(value: &IntOrString, total: i32, rounding: Rounding) -> i32 {
    match value {
        IntOrString::Int(n) => (*n).max(0),
        IntOrString::String(s) => {
            let Some(percent) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return 0;
            };
            let product = percent.max(0) * i64::from(total.max(0));
            let value = match rounding {
                Rounding::Up => (product + 99) / 100,
                Rounding::Down => product / 100,
            };
            i32::try_from(value).unwrap_or(i32::MAX)
        }
    }
}

/// The size the new ReplicaSet may grow to now (Kubernetes' `NewRSNewReplicas`): for a
/// rolling update, as far as `spec.replicas + maxSurge` pods in all allow — counting for each
/// ReplicaSet the pods it may still have, not only those it is asked for — and never beyond
/// `spec.replicas`; for Recreate, `spec.replicas` at once.
pub(super) fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new: &ReplicaSet) -> i32 {
    let replicas = desired(d);
    let current_new = spec_replicas(new);
    match Strategy::of(d) {
        Strategy::Recreate => replicas,
        Strategy::RollingUpdate { max_surge, .. } => {
            let current: i32 = all
                .iter()
                .map(|rs| super::replicasets::pods_at_most(rs))
                .sum();
            let max_total = replicas + max_surge;
            if current >= max_total {
                return current_new;
            }
            let scale_up = (max_total - current).min(replicas - current_new).max(0);
            current_new + scale_up
        }
    }
}

/// The new sizes of `active` ReplicaSets when the Deployment's size changes mid-rollout
/// (Kubernetes' proportional scaling): the difference between `spec.replicas + maxSurge` (0
/// if the Deployment is scaled to 0) and what they are asked for in all is shared in
/// proportion to each one's size relative to the `max-replicas` it was last sized for; the
/// rounding leftover goes to the first one (the largest: newest first when growing, oldest
/// first when shrinking). Returns one size per ReplicaSet of `active`, in its order.
pub(super) fn proportional_sizes(d: &Deployment, active: &[&ReplicaSet]) -> Vec<i32> {
    let replicas = desired(d);
    let allowed = if replicas > 0 {
        replicas + max_surge(d)
    } else {
        0
    };
    let to_add = allowed - sum_spec(active);
    let mut added = 0;
    let mut sizes: Vec<i32> = active
        .iter()
        .map(|rs| {
            let share = proportion(d, rs, to_add, added);
            added += share;
            spec_replicas(rs) + share
        })
        .collect();
    if to_add != 0 {
        if let Some(first) = sizes.first_mut() {
            *first = (*first + to_add - added).max(0);
        }
    }
    sizes
}

/// The share of `to_add` (with `added` already handed out) that `rs` gets.
fn proportion(d: &Deployment, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
    if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(d, rs);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// How much `rs` should grow (or shrink) for the Deployment's new size, rounded to the
/// nearest.
fn fraction(d: &Deployment, rs: &ReplicaSet) -> i32 {
    let replicas = desired(d);
    if replicas == 0 {
        return -spec_replicas(rs);
    }
    let deployment_replicas = f64::from(replicas + max_surge(d));
    let annotated = max_replicas_annotation(rs)
        .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
    if annotated <= 0 {
        return 0;
    }
    let size = f64::from(spec_replicas(rs)) * deployment_replicas / f64::from(annotated);
    // The result of a rounded product of two i32s over a positive i32 fits an i32.
    #[allow(clippy::cast_possible_truncation)]
    let size = size.round() as i32;
    size - spec_replicas(rs)
}

#[cfg(test)]
mod tests {
    use super::super::annotations::{DESIRED_REPLICAS, MAX_REPLICAS};
    use super::super::replicasets::testing::rs;
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};

    fn deployment(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unavailable),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn percentages_should_round_surge_up_and_unavailable_down() {
        let d = deployment(10, pct("25%"), pct("25%"));
        assert_eq!(max_surge(&d), 3);
        assert_eq!(max_unavailable(&d), 2);
        let d = deployment(1, pct("25%"), pct("25%"));
        assert_eq!((max_surge(&d), max_unavailable(&d)), (1, 0));
    }

    #[test]
    fn zero_fenceposts_should_allow_one_unavailable() {
        let d = deployment(3, IntOrString::Int(0), pct("10%"));
        assert_eq!((max_surge(&d), max_unavailable(&d)), (0, 1));
    }

    #[test]
    fn max_unavailable_should_not_exceed_replicas_and_be_zero_for_recreate() {
        let d = deployment(2, IntOrString::Int(1), IntOrString::Int(5));
        assert_eq!(max_unavailable(&d), 2);
        let mut recreate = d.clone();
        if let Some(s) = recreate.spec.as_mut().and_then(|s| s.strategy.as_mut()) {
            s.type_ = Some("Recreate".into());
            s.rolling_update = None;
        }
        assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (0, 0));
    }

    #[test]
    fn new_replicas_should_stay_within_surge_counting_pods_not_yet_gone() {
        let d = deployment(4, IntOrString::Int(1), IntOrString::Int(1));
        let old = rs("old", 0, 4, 4, 4);
        let new = rs("new", 10, 0, 0, 0);
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 1);
        // Old scaled down to 2 but still has 4 pods: no room yet.
        let old = rs("old", 0, 2, 4, 2);
        let new = rs("new", 10, 1, 1, 1);
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 1);
        let old = rs("old", 0, 2, 2, 2);
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 3);
        // Never beyond spec.replicas.
        let old = rs("old", 0, 0, 0, 0);
        assert_eq!(new_rs_new_replicas(&d, &[&old, &new], &new), 4);
    }

    fn sized_for(mut r: ReplicaSet, desired: i32, max: i32) -> ReplicaSet {
        r.metadata.annotations = Some(
            [
                (DESIRED_REPLICAS.to_owned(), desired.to_string()),
                (MAX_REPLICAS.to_owned(), max.to_string()),
            ]
            .into(),
        );
        r
    }

    #[test]
    fn scaling_mid_rollout_should_share_the_difference_proportionally() {
        // 10 replicas, surge 3: the rollout had old=8, new=5 (13 in all); now scaled to 20.
        let d = deployment(20, IntOrString::Int(3), IntOrString::Int(2));
        let new = sized_for(rs("new", 10, 5, 5, 0), 10, 13);
        let old = sized_for(rs("old", 0, 8, 8, 8), 10, 13);
        let mut active = vec![&new, &old];
        active.sort_by(|a, b| by_size_newer_for_test(a, b));
        let sizes = proportional_sizes(&d, &active);
        assert_eq!(sizes.iter().sum::<i32>(), 23, "20 + surge 3");
        let by_name: Vec<_> = active
            .iter()
            .zip(&sizes)
            .map(|(rs, n)| (rs.metadata.name.clone().unwrap_or_default(), *n))
            .collect();
        assert_eq!(by_name, [("old".to_owned(), 14), ("new".to_owned(), 9)]);
    }

    #[test]
    fn scaling_to_zero_should_empty_every_replicaset() {
        let d = deployment(0, IntOrString::Int(1), IntOrString::Int(1));
        let new = sized_for(rs("new", 10, 2, 2, 0), 4, 5);
        let old = sized_for(rs("old", 0, 3, 3, 3), 4, 5);
        let sizes = proportional_sizes(&d, &[&old, &new]);
        assert_eq!(sizes, [0, 0]);
    }

    fn by_size_newer_for_test(a: &ReplicaSet, b: &ReplicaSet) -> std::cmp::Ordering {
        super::super::replicasets::by_size_newer(a, b)
    }
}
