//! The Kubernetes HorizontalPodAutoscaler as a pure recommender: the same decision
//! kube-controller-manager makes each sync period (15 s) for `Resource` metrics
//! (`averageUtilization` and `averageValue` targets) and for `Object` and `External` metrics
//! whose values the caller read ([`MetricTarget`]), without the I/O. The HPA loop calls
//! [`HpaRecommender::recommend`], applies the answer to the scale subresource, and on success
//! calls [`Recommender::record_scale`].
//!
//! One sync, as Kubernetes does it:
//! 1. `spec.replicas == 0` with `minReplicas > 0`: autoscaling is disabled
//!    (`ScalingActive=False, ScalingDisabled`), nothing changes.
//! 2. Outside `[minReplicas, maxReplicas]`: go to the nearest bound, no metrics read.
//! 3. Otherwise each metric proposes a count ([`resource_replicas`],
//!    [`raw_resource_replicas`], [`value_replicas`]); the largest wins. If every metric
//!    failed, or some failed and the rest would scale down, nothing changes
//!    (`ScalingActive=False` with the first failure: `FailedGetResourceMetric`,
//!    `FailedGetObjectMetric`, `FailedGetExternalMetric`); else `ScalingActive=True,
//!    ValidMetricFound` naming the winning metric.
//! 4. The proposal is stabilized ([`Stabilizer`]; `AbleToScale=True` with `ScaleUpStabilized`
//!    / `ScaleDownStabilized` when that changed it, else `ReadyForNewScale`), then bounded by
//!    the rate policies and min/max ([`RateLimiter`]; `ScalingLimited` with the reason).

mod behavior;
mod metric;
mod replicas;

use std::time::Duration;

pub use behavior::{
    Behavior, Limit, PolicyKind, RateLimiter, ScalingPolicy, ScalingRules, SelectPolicy, Stabilizer,
};
pub use metric::{
    value_replicas, CurrentValueMilli, MetricTarget, ResourceGoal, ResourceTarget, ValueGoal,
    ValueProposal,
};
pub(crate) use replicas::ceil_replicas;
pub use replicas::{
    raw_resource_replicas, resource_replicas, HpaTuning, MetricError, ResourceProposal,
};

use crate::error::{ConfigError, Result};
use crate::observe::{
    ConditionType, CurrentValue, MetricValue, Observation, Recommendation, Recommender,
};

/// The parts of an HPA's spec the decision depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct HpaSpec {
    /// `minReplicas` (≥ 1 here; scale-to-zero is not modelled).
    pub min_replicas: i32,
    /// `maxReplicas` (≥ `min_replicas`).
    pub max_replicas: i32,
    /// `metrics`; at least one.
    pub metrics: Vec<MetricTarget>,
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
            }
            .into()],
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
        if let Some(m) = self.metrics.iter().find(|m| !m.target_is_positive()) {
            return Err(ConfigError::Invalid(format!(
                "the target of {} must be > 0",
                m.description()
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

/// What one metric proposes: a replica count, the usage ratio and the current value.
fn metric_proposal(
    m: &MetricTarget,
    current: i32,
    obs: &Observation,
    now: Duration,
    tuning: &HpaTuning,
) -> Result<(i32, f64, CurrentValue), MetricError> {
    match m {
        MetricTarget::Resource { resource, goal } => {
            let p = match *goal {
                ResourceGoal::Utilization(u) => {
                    resource_replicas(current, u, resource, obs, now, tuning)?
                }
                ResourceGoal::AverageValue(v) => {
                    raw_resource_replicas(current, v, resource, obs, now, tuning)?
                }
            };
            let value = CurrentValue::Resource {
                resource: resource.clone(),
                average_utilization: p.utilization,
                average_value_milli: p.raw_average_milli,
            };
            Ok((p.replicas, p.usage_ratio, value))
        }
        MetricTarget::Object { key, goal, .. } | MetricTarget::External { key, goal, .. } => {
            let value = match obs.values.get(key) {
                Some(Ok(v)) => *v,
                Some(Err(e)) => return Err(MetricError::Source(e.clone())),
                None => return Err(MetricError::Source("the metric was not read".into())),
            };
            let p = value_replicas(current, value, *goal, obs, tuning)?;
            Ok((p.replicas, p.usage_ratio, p.current.into()))
        }
    }
}

/// Runs every metric; returns the winning proposal and every valid metric's usage ratio, or
/// `None` when the HPA would not act. The largest proposal wins; if every metric failed, or
/// some failed and the rest would scale down, the first failure is reported.
pub(crate) fn propose(
    metrics: &[MetricTarget],
    current: i32,
    obs: &Observation,
    now: Duration,
    tuning: &HpaTuning,
    rec: &mut Recommendation,
) -> Option<(i32, Vec<f64>)> {
    let mut best: Option<(i32, &MetricTarget)> = None;
    let mut first_error: Option<(&'static str, String)> = None;
    let mut invalid = 0;
    let mut ratios = Vec::new();
    for (index, m) in metrics.iter().enumerate() {
        match metric_proposal(m, current, obs, now, tuning) {
            Ok((replicas, ratio, value)) => {
                rec.current_metrics.push(MetricValue {
                    index,
                    current: value,
                });
                if best.is_none_or(|(b, _)| replicas > b) {
                    best = Some((replicas, m));
                }
                ratios.push(ratio);
            }
            Err(e) => {
                invalid += 1;
                first_error.get_or_insert_with(|| (m.failure_reason(), m.failure_message(&e)));
            }
        }
    }
    match best {
        Some((b, m)) if invalid == 0 || b >= current => {
            rec.set_condition(
                ConditionType::ScalingActive,
                true,
                "ValidMetricFound",
                format!(
                    "the HPA was able to successfully calculate a replica count from {}",
                    m.description()
                ),
            );
            Some((b, ratios))
        }
        _ => {
            let (reason, message) = first_error
                .unwrap_or_else(|| ("FailedGetResourceMetric", "invalid metrics".into()));
            rec.set_condition(ConditionType::ScalingActive, false, reason, message);
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

#[cfg(test)]
mod value_tests;
