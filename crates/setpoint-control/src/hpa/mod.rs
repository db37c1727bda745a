//! The Kubernetes HorizontalPodAutoscaler as a pure recommender: the same decision
//! kube-controller-manager makes each sync period (15 s) for `Resource` metrics with
//! `averageUtilization` targets, without the I/O. The HPA loop calls
//! [`HpaRecommender::recommend`], applies the answer to the scale subresource, and on success
//! calls [`Recommender::record_scale`].
//!
//! One sync, as Kubernetes does it:
//! 1. `spec.replicas == 0` with `minReplicas > 0`: autoscaling is disabled
//!    (`ScalingActive=False, ScalingDisabled`), nothing changes.
//! 2. Outside `[minReplicas, maxReplicas]`: go to the nearest bound, no metrics read.
//! 3. Otherwise each metric proposes a count ([`resource_replicas`]); the largest wins. If
//!    every metric failed, or some failed and the rest would scale down, nothing changes
//!    (`ScalingActive=False, FailedGetResourceMetric`); else `ScalingActive=True,
//!    ValidMetricFound`.
//! 4. The proposal is stabilized ([`Stabilizer`]; `AbleToScale=True` with `ScaleUpStabilized`
//!    / `ScaleDownStabilized` when that changed it, else `ReadyForNewScale`), then bounded by
//!    the rate policies and min/max ([`RateLimiter`]; `ScalingLimited` with the reason).

mod behavior;
mod replicas;

use std::time::Duration;

pub use behavior::{
    Behavior, Limit, PolicyKind, RateLimiter, ScalingPolicy, ScalingRules, SelectPolicy, Stabilizer,
};
pub(crate) use replicas::ceil_replicas;
pub use replicas::{resource_replicas, HpaTuning, MetricError, ResourceProposal};

use crate::error::{ConfigError, Result};
use crate::observe::{ConditionType, MetricValue, Observation, Recommendation, Recommender};

/// A `Resource` metric with an `averageUtilization` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTarget {
    /// The resource (`cpu`, `memory`).
    pub resource: String,
    /// Target average utilisation, percent of requests (> 0).
    pub average_utilization: i32,
}

/// The parts of an HPA's spec the decision depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct HpaSpec {
    /// `minReplicas` (≥ 1 here; scale-to-zero is not modelled).
    pub min_replicas: i32,
    /// `maxReplicas` (≥ `min_replicas`).
    pub max_replicas: i32,
    /// `metrics`; at least one.
    pub metrics: Vec<ResourceTarget>,
    /// `behavior` (defaults when the user gave none, as the API server defaults it).
    pub behavior: Behavior,
}

impl HpaSpec {
    /// One CPU utilisation target with default behavior.
    pub fn cpu(min_replicas: i32, max_replicas: i32, target_utilization: i32) -> Self {
        HpaSpec {
            min_replicas,
            max_replicas,
            metrics: vec![ResourceTarget {
                resource: "cpu".into(),
                average_utilization: target_utilization,
            }],
            behavior: Behavior::default(),
        }
    }

    /// Checks the invariants the API server's validation would.
    pub fn validate(&self) -> Result<()> {
        if self.min_replicas < 1 || self.max_replicas < self.min_replicas {
            return Err(ConfigError::Invalid(format!(
                "replicas bounds [{}, {}] must satisfy 1 <= min <= max",
                self.min_replicas, self.max_replicas
            )));
        }
        if self.metrics.is_empty() {
            return Err(ConfigError::Invalid(
                "at least one metric is required".into(),
            ));
        }
        if let Some(m) = self.metrics.iter().find(|m| m.average_utilization <= 0) {
            return Err(ConfigError::Invalid(format!(
                "target utilization of {} must be > 0",
                m.resource
            )));
        }
        for rules in [&self.behavior.scale_up, &self.behavior.scale_down] {
            if let Some(p) = rules.policies.iter().find(|p| {
                p.value <= 0 || p.period.is_zero() || p.period > Duration::from_secs(1800)
            }) {
                return Err(ConfigError::Invalid(format!(
                    "invalid scaling policy {p:?}"
                )));
            }
            if rules.stabilization_window > Duration::from_secs(3600) {
                return Err(ConfigError::Invalid(
                    "stabilization window over 1 hour".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Kubernetes' HPA decision for one HPA object, with the state it keeps between syncs.
#[derive(Debug, Clone)]
pub struct HpaRecommender {
    spec: HpaSpec,
    tuning: HpaTuning,
    stabilizer: Stabilizer,
    limiter: RateLimiter,
}

impl HpaRecommender {
    /// A recommender for `spec` with the controller-manager flags `tuning`.
    pub fn new(spec: HpaSpec, tuning: HpaTuning) -> Result<Self> {
        spec.validate()?;
        if tuning.tolerance.is_nan() || tuning.tolerance < 0.0 {
            return Err(ConfigError::Invalid("tolerance must be >= 0".into()));
        }
        Ok(HpaRecommender {
            spec,
            tuning,
            stabilizer: Stabilizer::default(),
            limiter: RateLimiter::default(),
        })
    }

    /// The spec in force.
    pub fn spec(&self) -> &HpaSpec {
        &self.spec
    }
}

/// Runs every metric; returns the winning proposal or `None` when the HPA would not act.
pub(crate) fn propose(
    metrics: &[ResourceTarget],
    current: i32,
    obs: &Observation,
    now: Duration,
    tuning: &HpaTuning,
    rec: &mut Recommendation,
) -> Option<(i32, Vec<ResourceProposal>)> {
    let mut best: Option<i32> = None;
    let mut best_metric = "";
    let mut first_error = None;
    let mut invalid = 0;
    let mut proposals = Vec::new();
    for m in metrics {
        match resource_replicas(
            current,
            m.average_utilization,
            &m.resource,
            obs,
            now,
            tuning,
        ) {
            Ok(p) => {
                rec.current_metrics.push(MetricValue {
                    resource: m.resource.clone(),
                    average_utilization: p.utilization,
                    average_value_milli: p.raw_average_milli,
                });
                if best.is_none_or(|b| p.replicas > b) {
                    best = Some(p.replicas);
                    best_metric = m.resource.as_str();
                }
                proposals.push(p);
            }
            Err(e) => {
                invalid += 1;
                first_error.get_or_insert(format!(
                    "the HPA was unable to compute the replica count: failed to get {} utilization: {e}",
                    m.resource
                ));
            }
        }
    }
    match best {
        Some(b) if invalid == 0 || b >= current => {
            rec.set_condition(
                ConditionType::ScalingActive,
                true,
                "ValidMetricFound",
                format!(
                    "the HPA was able to successfully calculate a replica count from {} resource utilization (percentage of request)",
                    best_metric
                ),
            );
            Some((b, proposals))
        }
        _ => {
            rec.set_condition(
                ConditionType::ScalingActive,
                false,
                "FailedGetResourceMetric",
                first_error.unwrap_or_else(|| "invalid metrics".into()),
            );
            None
        }
    }
}

impl Recommender for HpaRecommender {
    fn name(&self) -> &str {
        "hpa"
    }

    fn recommend(&mut self, now: Duration, obs: &Observation) -> Recommendation {
        let current = obs.spec_replicas;
        let spec = &self.spec;
        let mut rec = Recommendation {
            replicas: current,
            proposal: None,
            conditions: Vec::new(),
            current_metrics: Vec::new(),
            terms: None,
        };
        rec.set_condition(
            ConditionType::AbleToScale,
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        );
        if current == 0 && spec.min_replicas != 0 {
            rec.set_condition(
                ConditionType::ScalingActive,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            );
            return rec;
        }
        if current > spec.max_replicas {
            rec.replicas = spec.max_replicas;
            return rec;
        }
        if current < spec.min_replicas {
            rec.replicas = spec.min_replicas;
            return rec;
        }
        let Some((proposal, _)) = propose(&spec.metrics, current, obs, now, &self.tuning, &mut rec)
        else {
            return rec;
        };
        rec.proposal = Some(proposal);
        let stabilized = self
            .stabilizer
            .stabilize(&spec.behavior, current, proposal, now);
        if stabilized != proposal {
            if proposal >= current {
                rec.set_condition(
                    ConditionType::AbleToScale,
                    true,
                    "ScaleUpStabilized",
                    "recent recommendations were lower than current one, applying the lowest recent recommendation",
                );
            } else {
                rec.set_condition(
                    ConditionType::AbleToScale,
                    true,
                    "ScaleDownStabilized",
                    "recent recommendations were higher than current one, applying the highest recent recommendation",
                );
            }
        } else {
            rec.set_condition(
                ConditionType::AbleToScale,
                true,
                "ReadyForNewScale",
                "recommended size matches current size",
            );
        }
        let (desired, why) = self.limiter.limit(
            &spec.behavior,
            current,
            stabilized,
            spec.min_replicas,
            spec.max_replicas,
            now,
        );
        rec.set_condition(
            ConditionType::ScalingLimited,
            desired != stabilized,
            why.reason(),
            why.message(),
        );
        rec.replicas = desired;
        rec
    }

    fn record_scale(&mut self, now: Duration, from: i32, to: i32) {
        self.limiter.record(&self.spec.behavior, now, from, to);
    }
}

#[cfg(test)]
mod tests;
