//! What an autoscaling recommender sees and what it answers: the target's replica count, its
//! pods (phase, readiness, start, requests), the latest resource metrics per pod and the
//! values of `Object` and `External` metrics — the inputs the Kubernetes HPA reads from the
//! scale subresource, the pod lister, metrics.k8s.io and the custom/external metrics APIs —
//! and a [`Recommendation`] with the conditions an HPA would report.
//!
//! Times are [`Duration`]s since an arbitrary epoch shared by the caller's clock, the pods and
//! the metrics (the simulation's start, or a controller's injected clock).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pid::PidTerms;

/// A pod's lifecycle phase, as `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PodPhase {
    /// Accepted, containers not yet running.
    Pending,
    /// Bound and at least one container running.
    Running,
    /// All containers terminated successfully.
    Succeeded,
    /// All containers terminated, at least one in failure.
    Failed,
}

/// `status` of a pod condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

/// A pod's `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyCondition {
    /// The condition's status.
    pub status: ConditionStatus,
    /// `lastTransitionTime`.
    pub last_transition: Duration,
}

/// One pod selected by the scale target's selector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodInfo {
    /// `metadata.name`; metrics are matched by it.
    pub name: String,
    /// `status.phase`.
    pub phase: PodPhase,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.startTime`, if set.
    pub start_time: Option<Duration>,
    /// The `Ready` condition, if present.
    pub ready: Option<ReadyCondition>,
    /// Sum of the containers' requests per resource in milli-units (`cpu` → millicores). A
    /// resource absent here means some container has no request for it.
    pub requests: BTreeMap<String, i64>,
}

impl PodInfo {
    /// Whether the pod counts as ready (Running with `Ready=True`).
    pub fn is_ready(&self) -> bool {
        self.phase == PodPhase::Running
            && matches!(self.ready, Some(c) if c.status == ConditionStatus::True)
    }
}

/// One pod's usage of one resource, as metrics.k8s.io reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodMetric {
    /// Usage in milli-units, averaged over `window`.
    pub value_milli: i64,
    /// When the sample was taken (end of the window).
    pub timestamp: Duration,
    /// The averaging window.
    pub window: Duration,
}

/// Per-pod metrics of one resource, keyed by pod name.
pub type PodMetrics = BTreeMap<String, PodMetric>;

/// Everything a recommender reads for one decision.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Observation {
    /// `spec.replicas` of the scale target.
    pub spec_replicas: i32,
    /// `status.replicas` of the scale target: the `AverageValue` formulas of `Object` and
    /// `External` metrics divide by it, as Kubernetes does.
    #[serde(default)]
    pub status_replicas: i32,
    /// The pods the target's selector matches.
    pub pods: Vec<PodInfo>,
    /// Resource name → per-pod metrics; a resource missing here could not be fetched.
    pub metrics: BTreeMap<String, PodMetrics>,
    /// `Object` and `External` metric values by the key of their
    /// [`MetricTarget`](crate::hpa::MetricTarget): milli-units (for an `External` metric the
    /// sum over the series its selector matched), or why it could not be read. A key missing
    /// here was not read.
    #[serde(default)]
    pub values: BTreeMap<String, std::result::Result<i64, String>>,
}

impl Observation {
    /// Pods that are not being deleted and have not failed.
    pub fn live_pods(&self) -> impl Iterator<Item = &PodInfo> + '_ {
        self.pods
            .iter()
            .filter(|p| !p.deleting && p.phase != PodPhase::Failed)
    }

    /// How many live pods are ready.
    pub fn ready_pods(&self) -> usize {
        self.live_pods().filter(|p| p.is_ready()).count()
    }
}

/// The HPA condition types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionType {
    /// Whether the autoscaler can fetch and update the scale.
    AbleToScale,
    /// Whether a valid metric produced a recommendation.
    ScalingActive,
    /// Whether the recommendation was limited (min/max replicas, rate policies).
    ScalingLimited,
}

/// A condition as the HPA reports it in `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// The condition type.
    pub kind: ConditionType,
    /// True or false.
    pub status: bool,
    /// CamelCase reason, as Kubernetes spells it.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
}

/// The current value of one metric, for `status.currentMetrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricValue {
    /// Index of the metric in the spec's `metrics` the recommender was given.
    pub index: usize,
    /// What was measured.
    pub current: CurrentValue,
}

/// The `current` part of a metric's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CurrentValue {
    /// A `Resource` metric.
    Resource {
        /// The resource (`cpu`, `memory`).
        resource: String,
        /// Average utilisation in integer percent of requests (only for a `Utilization`
        /// target, as the HPA reports it).
        average_utilization: Option<i32>,
        /// Average usage per pod in milli-units.
        average_value_milli: i64,
    },
    /// An `Object` or `External` metric with a `Value` target: the value, milli-units.
    Value(i64),
    /// An `Object` or `External` metric with an `AverageValue` target: the value divided by
    /// the target's `status.replicas`, rounded up, milli-units.
    AverageValue(i64),
}

/// A recommender's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    /// The replica count to set (equal to the current count for "no change").
    pub replicas: i32,
    /// The unnormalised proposal from the metrics, if any metric was valid.
    pub proposal: Option<i32>,
    /// Conditions to report, at most one per type.
    pub conditions: Vec<Condition>,
    /// Current metric values.
    pub current_metrics: Vec<MetricValue>,
    /// The PID terms, for a PID recommender.
    pub terms: Option<PidTerms>,
}

impl Recommendation {
    /// The condition of the given type, if reported.
    pub fn condition(&self, kind: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }

    pub(crate) fn set_condition(
        &mut self,
        kind: ConditionType,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) {
        let message = message.into();
        self.conditions.retain(|c| c.kind != kind);
        self.conditions.push(Condition {
            kind,
            status,
            reason,
            message,
        });
    }
}

/// An autoscaling law: called once per sync period with the latest observation.
pub trait Recommender {
    /// A short name for reports (`hpa`, `pid`).
    fn name(&self) -> &str;

    /// The replica count to set now, and why.
    fn recommend(&mut self, now: Duration, observation: &Observation) -> Recommendation;

    /// Tells the recommender its recommendation was applied: the scale went from `from` to
    /// `to` at `now`. Rate policies count these events.
    fn record_scale(&mut self, now: Duration, from: i32, to: i32);
}
