//! The metrics an HPA can name ([`MetricTarget`]) and the replica calculation of `Object` and
//! `External` metrics, with Kubernetes' semantics (kube-controller-manager's replica
//! calculator). Both read one number — an object's value, or the sum of the external series a
//! selector matched — so both use the same two formulas:
//!
//! - `Value` target: `ratio = value / target`. Inside the tolerance the count stays; else it
//!   is `ceil(ratio × ready pods)`, the ready pods being those of the target's selector that
//!   are `Running` with `Ready=True` (none at all is an error). A target at 0 replicas gets
//!   `ceil(ratio)`.
//! - `AverageValue` target: `ratio = value / (target × status replicas)`. Inside the
//!   tolerance the count stays; else it is `ceil(value / target)`. The reported current value
//!   is `ceil(value / status replicas)`.

use crate::observe::{CurrentValue, Observation};

use super::replicas::{ceil_replicas, HpaTuning, MetricError};

/// A `Resource` metric with an `averageUtilization` target (the simulation's metric).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTarget {
    /// The resource (`cpu`, `memory`).
    pub resource: String,
    /// Target average utilisation, percent of requests (> 0).
    pub average_utilization: i32,
}

/// What a `Resource` metric aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceGoal {
    /// `averageUtilization`: percent of the pods' requests (> 0).
    Utilization(i32),
    /// `averageValue`: usage per pod, milli-units (> 0).
    AverageValue(i64),
}

/// What an `Object` or `External` metric aims at, milli-units (> 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueGoal {
    /// `value`: the metric itself.
    Value(i64),
    /// `averageValue`: the metric divided by the target's replicas.
    AverageValue(i64),
}

impl ValueGoal {
    fn milli(self) -> i64 {
        match self {
            ValueGoal::Value(v) | ValueGoal::AverageValue(v) => v,
        }
    }
}

/// One entry of an HPA's `metrics` the recommender evaluates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricTarget {
    /// A `Resource` metric of the target's pods (metrics.k8s.io).
    Resource {
        /// The resource (`cpu`, `memory`).
        resource: String,
        /// Its target.
        goal: ResourceGoal,
    },
    /// An `Object` metric: one value describing one object.
    Object {
        /// Where its value is in [`Observation::values`].
        key: String,
        /// The described object's kind, for messages.
        kind: String,
        /// The metric's name, for messages.
        metric: String,
        /// Its target.
        goal: ValueGoal,
    },
    /// An `External` metric: the sum of the series a selector matches.
    External {
        /// Where its value is in [`Observation::values`].
        key: String,
        /// The metric's name (with its selector, if any), for messages.
        metric: String,
        /// Its target.
        goal: ValueGoal,
    },
}

impl From<ResourceTarget> for MetricTarget {
    fn from(t: ResourceTarget) -> Self {
        MetricTarget::Resource {
            resource: t.resource,
            goal: ResourceGoal::Utilization(t.average_utilization),
        }
    }
}

impl MetricTarget {
    /// Whether the target value is positive, as the API server's validation requires.
    pub(crate) fn target_is_positive(&self) -> bool {
        match self {
            MetricTarget::Resource {
                goal: ResourceGoal::Utilization(u),
                ..
            } => *u > 0,
            MetricTarget::Resource {
                goal: ResourceGoal::AverageValue(v),
                ..
            } => *v > 0,
            MetricTarget::Object { goal, .. } | MetricTarget::External { goal, .. } => {
                goal.milli() > 0
            }
        }
    }

    /// How the metric is named in `ValidMetricFound` (as Kubernetes words it).
    pub(crate) fn description(&self) -> String {
        match self {
            MetricTarget::Resource {
                resource,
                goal: ResourceGoal::Utilization(_),
            } => format!("{resource} resource utilization (percentage of request)"),
            MetricTarget::Resource { resource, .. } => format!("{resource} resource"),
            MetricTarget::Object { kind, metric, .. } => format!("{kind} metric {metric}"),
            MetricTarget::External { metric, .. } => format!("external metric {metric}"),
        }
    }

    /// The `ScalingActive=False` reason when the metric cannot be evaluated.
    pub(crate) fn failure_reason(&self) -> &'static str {
        match self {
            MetricTarget::Resource { .. } => "FailedGetResourceMetric",
            MetricTarget::Object { .. } => "FailedGetObjectMetric",
            MetricTarget::External { .. } => "FailedGetExternalMetric",
        }
    }

    /// The error text of a failure, as Kubernetes wraps it.
    pub(crate) fn failure_message(&self, e: &MetricError) -> String {
        let what = match self {
            MetricTarget::Resource {
                resource,
                goal: ResourceGoal::Utilization(_),
            } => format!("failed to get {resource} utilization"),
            MetricTarget::Resource { resource, .. } => format!("failed to get {resource} usage"),
            MetricTarget::Object { .. } => "failed to get object metric value".to_owned(),
            MetricTarget::External { metric, .. } => {
                format!("failed to get {metric} external metric value")
            }
        };
        format!("the HPA was unable to compute the replica count: {what}: {e}")
    }
}

/// The outcome of [`value_replicas`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueProposal {
    /// The proposed replica count.
    pub replicas: i32,
    /// The ratio compared with the tolerance.
    pub usage_ratio: f64,
    /// What to report as the current value.
    pub current: CurrentValueMilli,
}

/// The current value of an `Object` or `External` metric, milli-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurrentValueMilli {
    /// The value (a `Value` target).
    Value(i64),
    /// The value per replica (an `AverageValue` target).
    AverageValue(i64),
}

impl From<CurrentValueMilli> for CurrentValue {
    fn from(c: CurrentValueMilli) -> Self {
        match c {
            CurrentValueMilli::Value(v) => CurrentValue::Value(v),
            CurrentValueMilli::AverageValue(v) => CurrentValue::AverageValue(v),
        }
    }
}

/// The replica count an `Object` or `External` metric whose observed value is `value`
/// (milli-units) asks for, given `current` (`spec.replicas`) and the observation's pods and
/// `status_replicas`.
pub fn value_replicas(
    current: i32,
    value: i64,
    goal: ValueGoal,
    obs: &Observation,
    tuning: &HpaTuning,
) -> Result<ValueProposal, MetricError> {
    let target = goal.milli();
    if target <= 0 {
        return Err(MetricError::InvalidTarget);
    }
    let (value_f, target_f) = (value as f64, target as f64);
    match goal {
        ValueGoal::Value(_) => {
            let ratio = value_f / target_f;
            let proposal = |replicas| ValueProposal {
                replicas,
                usage_ratio: ratio,
                current: CurrentValueMilli::Value(value),
            };
            if current == 0 {
                return Ok(proposal(ceil_replicas(ratio)));
            }
            if (1.0 - ratio).abs() <= tuning.tolerance {
                return Ok(proposal(current));
            }
            if obs.pods.is_empty() {
                return Err(MetricError::NoPods);
            }
            let ready = obs.pods.iter().filter(|p| p.is_ready()).count();
            Ok(proposal(ceil_replicas(ratio * ready as f64)))
        }
        ValueGoal::AverageValue(_) => {
            let replicas = obs.status_replicas;
            let ratio = value_f / (target_f * f64::from(replicas));
            let proposed = if (1.0 - ratio).abs() > tuning.tolerance {
                ceil_replicas(value_f / target_f)
            } else {
                replicas
            };
            let average = if replicas > 0 {
                ceil_i64(value_f / f64::from(replicas))
            } else {
                value
            };
            Ok(ValueProposal {
                replicas: proposed,
                usage_ratio: ratio,
                current: CurrentValueMilli::AverageValue(average),
            })
        }
    }
}

/// `ceil` into `i64`, saturating.
fn ceil_i64(v: f64) -> i64 {
    if v.is_nan() {
        return 0;
    }
    v.ceil().clamp(i64::MIN as f64, i64::MAX as f64) as i64
}
