//! `spec.behavior` of an `autoscaling/v2` HorizontalPodAutoscaler: stabilization windows and
//! rate policies, with Kubernetes' defaults and semantics.
//!
//! - **Stabilization**: every unnormalised recommendation is remembered with its time. The
//!   result is the current count pulled up to the *lowest* recommendation of the scale-up
//!   window and down to the *highest* of the scale-down window (defaults 0 s and 300 s), so a
//!   scale-down happens only once every recommendation of the last 5 minutes agrees.
//! - **Rate policies**: for each policy, the replicas at the start of its period are the
//!   current count minus the scale-ups plus the scale-downs recorded within the period; a
//!   `Pods` policy allows `± value` from there, a `Percent` policy `× (1 ± value/100)`
//!   (rounded up on the way up, truncated on the way down). `selectPolicy: Max` picks the
//!   policy allowing the largest change, `Min` the smallest, `Disabled` forbids the direction.
//!   Defaults: up — 100 %/15 s and 4 pods/15 s, Max; down — 100 %/15 s.
//!
//! An event or recommendation exactly one period (window) old no longer counts: Kubernetes
//! compares with `After(now − period)`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How one policy limits change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PolicyKind {
    /// An absolute number of pods per period.
    Pods,
    /// A percentage of the replicas at the start of the period.
    Percent,
}

/// One `HPAScalingPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingPolicy {
    /// Pods or Percent.
    pub kind: PolicyKind,
    /// The amount (> 0).
    pub value: i32,
    /// The period the amount applies to (1 s ..= 30 min).
    pub period: Duration,
}

/// `selectPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectPolicy {
    /// The policy allowing the biggest change.
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// `HPAScalingRules` for one direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingRules {
    /// `stabilizationWindowSeconds`.
    pub stabilization_window: Duration,
    /// `selectPolicy`.
    pub select_policy: SelectPolicy,
    /// `policies`.
    pub policies: Vec<ScalingPolicy>,
}

impl ScalingRules {
    /// Kubernetes' default scale-up rules.
    pub fn default_scale_up() -> Self {
        ScalingRules {
            stabilization_window: Duration::ZERO,
            select_policy: SelectPolicy::Max,
            policies: vec![
                ScalingPolicy {
                    kind: PolicyKind::Percent,
                    value: 100,
                    period: Duration::from_secs(15),
                },
                ScalingPolicy {
                    kind: PolicyKind::Pods,
                    value: 4,
                    period: Duration::from_secs(15),
                },
            ],
        }
    }

    /// Kubernetes' default scale-down rules.
    pub fn default_scale_down() -> Self {
        ScalingRules {
            stabilization_window: Duration::from_secs(300),
            select_policy: SelectPolicy::Max,
            policies: vec![ScalingPolicy {
                kind: PolicyKind::Percent,
                value: 100,
                period: Duration::from_secs(15),
            }],
        }
    }

    fn longest_period(&self) -> Duration {
        self.policies
            .iter()
            .map(|p| p.period)
            .max()
            .unwrap_or(Duration::ZERO)
    }
}

/// `spec.behavior`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Behavior {
    /// `scaleUp`.
    pub scale_up: ScalingRules,
    /// `scaleDown`.
    pub scale_down: ScalingRules,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            scale_up: ScalingRules::default_scale_up(),
            scale_down: ScalingRules::default_scale_down(),
        }
    }
}

/// A replica change that happened.
#[derive(Debug, Clone, Copy)]
struct ScaleEvent {
    at: Duration,
    change: i32,
}

/// Remembers scale events and bounds the next change by the rate policies.
#[derive(Debug, Clone, Default)]
pub struct RateLimiter {
    ups: Vec<ScaleEvent>,
    downs: Vec<ScaleEvent>,
}

/// Why a desired count was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Not limited (`DesiredWithinRange`).
    Within,
    /// Cut by a scale-up policy (`ScaleUpLimit`).
    ScaleUpLimit,
    /// Cut to `maxReplicas` (`TooManyReplicas`).
    TooMany,
    /// Cut by a scale-down policy (`ScaleDownLimit`).
    ScaleDownLimit,
    /// Cut to `minReplicas` (`TooFewReplicas`).
    TooFew,
}

impl Limit {
    /// The condition reason Kubernetes reports.
    pub fn reason(self) -> &'static str {
        match self {
            Limit::Within => "DesiredWithinRange",
            Limit::ScaleUpLimit => "ScaleUpLimit",
            Limit::TooMany => "TooManyReplicas",
            Limit::ScaleDownLimit => "ScaleDownLimit",
            Limit::TooFew => "TooFewReplicas",
        }
    }

    /// The condition message Kubernetes reports.
    pub fn message(self) -> &'static str {
        match self {
            Limit::Within => "the desired count is within the acceptable range",
            Limit::ScaleUpLimit => {
                "the desired replica count is increasing faster than the maximum scale rate"
            }
            Limit::TooMany => "the desired replica count is more than the maximum replica count",
            Limit::ScaleDownLimit => {
                "the desired replica count is decreasing faster than the maximum scale rate"
            }
            Limit::TooFew => "the desired replica count is less than the minimum replica count",
        }
    }
}

fn change_within(events: &[ScaleEvent], period: Duration, now: Duration) -> i32 {
    events
        .iter()
        .filter(|e| now.checked_sub(period).is_none_or(|cutoff| e.at > cutoff))
        .map(|e| e.change)
        .sum()
}

impl RateLimiter {
    /// Records that the scale went from `from` to `to` at `now`; events older than the
    /// longest policy period are reused, as Kubernetes does.
    pub fn record(&mut self, behavior: &Behavior, now: Duration, from: i32, to: i32) {
        let (events, rules, change) = if to > from {
            (&mut self.ups, &behavior.scale_up, to - from)
        } else if to < from {
            (&mut self.downs, &behavior.scale_down, from - to)
        } else {
            return;
        };
        let longest = rules.longest_period();
        let outdated = |e: &ScaleEvent| now.checked_sub(longest).is_some_and(|c| e.at < c);
        let event = ScaleEvent { at: now, change };
        match events.iter_mut().find(|e| outdated(e)) {
            Some(slot) => *slot = event,
            None => events.push(event),
        }
    }

    /// The highest count the scale-up policies allow now (never below `current`).
    pub fn scale_up_limit(&self, rules: &ScalingRules, current: i32, now: Duration) -> i32 {
        let limit = match rules.select_policy {
            SelectPolicy::Disabled => return current,
            SelectPolicy::Max => rules
                .policies
                .iter()
                .map(|p| self.up_proposal(p, current, now))
                .max(),
            SelectPolicy::Min => rules
                .policies
                .iter()
                .map(|p| self.up_proposal(p, current, now))
                .min(),
        };
        limit.unwrap_or(current).max(current)
    }

    fn up_proposal(&self, p: &ScalingPolicy, current: i32, now: Duration) -> i32 {
        let start = current - change_within(&self.ups, p.period, now)
            + change_within(&self.downs, p.period, now);
        match p.kind {
            PolicyKind::Pods => start.saturating_add(p.value),
            PolicyKind::Percent => super::replicas::ceil_replicas(
                f64::from(start) * (1.0 + f64::from(p.value) / 100.0),
            ),
        }
    }

    /// The lowest count the scale-down policies allow now (never above `current`).
    pub fn scale_down_limit(&self, rules: &ScalingRules, current: i32, now: Duration) -> i32 {
        let limit = match rules.select_policy {
            SelectPolicy::Disabled => return current,
            SelectPolicy::Max => rules
                .policies
                .iter()
                .map(|p| self.down_proposal(p, current, now))
                .min(),
            SelectPolicy::Min => rules
                .policies
                .iter()
                .map(|p| self.down_proposal(p, current, now))
                .max(),
        };
        limit.unwrap_or(current).min(current)
    }

    fn down_proposal(&self, p: &ScalingPolicy, current: i32, now: Duration) -> i32 {
        let start = current - change_within(&self.ups, p.period, now)
            + change_within(&self.downs, p.period, now);
        match p.kind {
            PolicyKind::Pods => start.saturating_sub(p.value),
            PolicyKind::Percent => (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32,
        }
    }

    /// Bounds `desired` by the policies and by `[min, max]`, saying what cut it.
    pub fn limit(
        &self,
        behavior: &Behavior,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        now: Duration,
    ) -> (i32, Limit) {
        if desired > current {
            let up = self.scale_up_limit(&behavior.scale_up, current, now);
            let (allowed, why) = if max > up {
                (up, Limit::ScaleUpLimit)
            } else {
                (max, Limit::TooMany)
            };
            if desired > allowed {
                return (allowed, why);
            }
        } else if desired < current {
            let down = self.scale_down_limit(&behavior.scale_down, current, now);
            let (allowed, why) = if min < down {
                (down, Limit::ScaleDownLimit)
            } else {
                (min, Limit::TooFew)
            };
            if desired < allowed {
                return (allowed, why);
            }
        }
        (desired, Limit::Within)
    }
}

/// Remembers unnormalised recommendations for the stabilization windows.
#[derive(Debug, Clone, Default)]
pub struct Stabilizer {
    recommendations: Vec<(Duration, i32)>,
}

impl Stabilizer {
    /// Stabilizes `desired` against the windows, records it (reusing a slot older than both
    /// windows), and returns the stabilized count.
    pub fn stabilize(
        &mut self,
        behavior: &Behavior,
        current: i32,
        desired: i32,
        now: Duration,
    ) -> i32 {
        let up_cutoff = now.checked_sub(behavior.scale_up.stabilization_window);
        let down_cutoff = now.checked_sub(behavior.scale_down.stabilization_window);
        let after = |at: Duration, cutoff: Option<Duration>| cutoff.is_none_or(|c| at > c);
        let before = |at: Duration, cutoff: Option<Duration>| cutoff.is_some_and(|c| at < c);
        let (mut up, mut down) = (desired, desired);
        let mut old_slot = None;
        for (i, &(at, rec)) in self.recommendations.iter().enumerate() {
            if after(at, up_cutoff) {
                up = up.min(rec);
            }
            if after(at, down_cutoff) {
                down = down.max(rec);
            }
            if before(at, up_cutoff) && before(at, down_cutoff) {
                old_slot = Some(i);
            }
        }
        let stabilized = current.max(up).min(down);
        match old_slot {
            Some(i) => self.recommendations[i] = (now, desired),
            None => self.recommendations.push((now, desired)),
        }
        stabilized
    }
}
