//! The HPA's replica calculation for `Resource` metrics with an `averageUtilization` target
//! ([`resource_replicas`]) or an `averageValue` target ([`raw_resource_replicas`]: the same
//! steps on raw per-pod averages, a missing pod taken at the target on a scale-down), with
//! Kubernetes' semantics (kube-controller-manager's replica calculator):
//!
//! - Pods being deleted or failed are ignored; pending pods count as unready; pods without a
//!   metric are *missing*. For `cpu` only, a pod is also unready if it has no `Ready`
//!   condition or start time, or — while within the CPU initialisation period (5 min) of its
//!   start — if it is not ready or its metric's window began before it became ready; after
//!   that period only if `Ready=False` and it never became ready (its last transition is
//!   within the initial readiness delay, 30 s, of its start).
//! - Utilisation is `Σ usage · 100 / Σ requests` in integer percent over the pods with
//!   metrics, and the usage ratio is that over the target.
//! - With no missing pods and no scale-up over unready pods: inside the tolerance
//!   (`|1 − ratio| ≤ 0.1`) keep the current count, else `ceil(ratio × ready pods)`.
//! - Otherwise missing pods are taken at 100 % of their request on a scale-down and 0 % on a
//!   scale-up, and on a scale-up unready pods at 0 %; the ratio is recomputed, and if it
//!   falls inside the tolerance or would reverse the direction, the current count is kept;
//!   else `ceil(new ratio × pods counted)`, unless that would reverse the direction.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::observe::{ConditionStatus, Observation, PodMetrics, PodPhase};

/// The controller-manager flags the calculation depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HpaTuning {
    /// `--horizontal-pod-autoscaler-tolerance` (0.1).
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period` (5 min).
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay` (30 s).
    pub initial_readiness_delay: Duration,
}

impl Default for HpaTuning {
    fn default() -> Self {
        HpaTuning {
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

/// Why no replica count could be computed from a metric (→ `ScalingActive=False`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    /// metrics.k8s.io returned nothing for the resource.
    #[error(
        "unable to get metrics for resource {0}: no metrics returned from resource metrics API"
    )]
    Unavailable(String),
    /// The selector matched no pods.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// A pod lacks a request for the resource.
    #[error("missing request for {0}")]
    MissingRequest(String),
    /// Every pod with a metric was ignored or unready.
    #[error("did not receive metrics for any ready pods")]
    NoReadyMetrics,
    /// No metric matched a known pod's request.
    #[error("no metrics returned matched known pods")]
    NoMatchingPods,
    /// The target value is not positive.
    #[error("the target value must be positive")]
    InvalidTarget,
    /// An `Object` or `External` metric's value could not be read (the reader's words).
    #[error("{0}")]
    Source(String),
}

/// The outcome of [`resource_replicas`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResourceProposal {
    /// The proposed replica count.
    pub replicas: i32,
    /// Current average utilisation (integer percent of requests) over the ready pods; `None`
    /// for an `averageValue` target.
    pub utilization: Option<i32>,
    /// Current average usage per counted pod, milli-units.
    pub raw_average_milli: i64,
    /// `utilization / target` (or `average / target`) — what the HPA compares with its
    /// tolerance.
    pub usage_ratio: f64,
    /// Pods counted as ready with a metric.
    pub ready_pods: usize,
}

/// How the pods were sorted for one metric.
#[derive(Debug, Default)]
struct Grouped {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

fn group_pods(
    obs: &Observation,
    metrics: &PodMetrics,
    resource: &str,
    now: Duration,
    tuning: &HpaTuning,
) -> Grouped {
    let mut g = Grouped::default();
    for pod in &obs.pods {
        if pod.deleting || pod.phase == PodPhase::Failed {
            g.ignored.insert(pod.name.clone());
            continue;
        }
        if pod.phase == PodPhase::Pending {
            g.unready.insert(pod.name.clone());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name) else {
            g.missing.insert(pod.name.clone());
            continue;
        };
        if resource == "cpu" {
            let unready = match (pod.ready, pod.start_time) {
                (Some(cond), Some(start)) => {
                    if start + tuning.cpu_initialization_period > now {
                        cond.status == ConditionStatus::False
                            || metric.timestamp < cond.last_transition + metric.window
                    } else {
                        cond.status == ConditionStatus::False
                            && start + tuning.initial_readiness_delay > cond.last_transition
                    }
                }
                _ => true,
            };
            if unready {
                g.unready.insert(pod.name.clone());
                continue;
            }
        }
        g.ready += 1;
    }
    g
}

/// `(ratio, utilisation %, raw average)` over `values` (pod → usage) with known requests.
fn utilization_ratio(
    values: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
    target: i32,
) -> Result<(f64, i32, i64), MetricError> {
    let (mut usage, mut request, mut n) = (0i64, 0i64, 0i64);
    for (pod, v) in values {
        if let Some(r) = requests.get(pod) {
            usage = usage.saturating_add(*v);
            request = request.saturating_add(*r);
            n += 1;
        }
    }
    if request <= 0 || n == 0 {
        return Err(MetricError::NoMatchingPods);
    }
    let utilization = i32::try_from(usage.saturating_mul(100) / request).unwrap_or(i32::MAX);
    Ok((
        f64::from(utilization) / f64::from(target.max(1)),
        utilization,
        usage / n,
    ))
}

/// `(ratio, integer average)` of raw `values` against `target` (milli-units per pod).
fn average_ratio(values: &BTreeMap<String, i64>, target: i64) -> (f64, i64) {
    let total = values.values().fold(0i64, |a, v| a.saturating_add(*v));
    let average = total / i64::try_from(values.len().max(1)).unwrap_or(i64::MAX);
    (average as f64 / target.max(1) as f64, average)
}

/// The pods of one resource metric: how they were grouped and the usable samples.
struct Sampled {
    groups: Grouped,
    values: BTreeMap<String, i64>,
}

fn sample(
    resource: &str,
    obs: &Observation,
    now: Duration,
    tuning: &HpaTuning,
) -> Result<Sampled, MetricError> {
    let metrics = obs
        .metrics
        .get(resource)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| MetricError::Unavailable(resource.to_string()))?;
    if obs.pods.is_empty() {
        return Err(MetricError::NoPods);
    }
    let groups = group_pods(obs, metrics, resource, now, tuning);
    let values = metrics
        .iter()
        .filter(|(name, _)| !groups.ignored.contains(*name) && !groups.unready.contains(*name))
        .map(|(name, m)| (name.clone(), m.value_milli))
        .collect();
    Ok(Sampled { groups, values })
}

/// The second half of Kubernetes' per-pod calculation, shared by the utilisation and raw
/// paths: with `ratio` over the ready samples, the count asked for — directly when nothing is
/// missing and no scale-up runs over unready pods, else after filling in missing pods
/// (`fallback(pod, ratio)`: `None` leaves the pod out) and, on a scale-up, unready pods at 0.
fn replicas_from_ratio(
    current: i32,
    ratio: f64,
    s: Sampled,
    tuning: &HpaTuning,
    fallback: impl Fn(&str, f64) -> Option<i64>,
    ratio_of: impl Fn(&BTreeMap<String, i64>) -> Result<f64, MetricError>,
) -> Result<i32, MetricError> {
    let Sampled {
        groups: g,
        mut values,
    } = s;
    let rebalance_unready = !g.unready.is_empty() && ratio > 1.0;
    if !rebalance_unready && g.missing.is_empty() {
        if (1.0 - ratio).abs() <= tuning.tolerance {
            return Ok(current);
        }
        return Ok(ceil_replicas(ratio * g.ready as f64));
    }
    for pod in &g.missing {
        if let Some(v) = fallback(pod, ratio) {
            values.insert(pod.clone(), v);
        }
    }
    if rebalance_unready {
        for pod in &g.unready {
            values.insert(pod.clone(), 0);
        }
    }
    let new_ratio = ratio_of(&values)?;
    if (1.0 - new_ratio).abs() <= tuning.tolerance
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(current);
    }
    let replicas = ceil_replicas(new_ratio * values.len() as f64);
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(current);
    }
    Ok(replicas)
}

/// The replica count one `Resource` metric with an `averageUtilization` target asks for.
pub fn resource_replicas(
    current: i32,
    target_utilization: i32,
    resource: &str,
    obs: &Observation,
    now: Duration,
    tuning: &HpaTuning,
) -> Result<ResourceProposal, MetricError> {
    let s = sample(resource, obs, now, tuning)?;
    let mut requests = BTreeMap::new();
    for pod in &obs.pods {
        let r = pod
            .requests
            .get(resource)
            .ok_or_else(|| MetricError::MissingRequest(resource.to_string()))?;
        requests.insert(pod.name.clone(), *r);
    }
    if s.values.is_empty() {
        return Err(MetricError::NoReadyMetrics);
    }
    let (ratio, utilization, raw) = utilization_ratio(&s.values, &requests, target_utilization)?;
    let ready_pods = s.groups.ready;
    let replicas = replicas_from_ratio(
        current,
        ratio,
        s,
        tuning,
        |pod, ratio| {
            if ratio < 1.0 {
                Some(requests.get(pod).copied().unwrap_or(0))
            } else if ratio > 1.0 {
                Some(0)
            } else {
                None
            }
        },
        |values| utilization_ratio(values, &requests, target_utilization).map(|r| r.0),
    )?;
    Ok(ResourceProposal {
        replicas,
        utilization: Some(utilization),
        raw_average_milli: raw,
        usage_ratio: ratio,
        ready_pods,
    })
}

/// The replica count one `Resource` metric with an `averageValue` target (`target_milli`
/// per pod) asks for: the utilisation path's grouping and rebalancing on raw averages, a
/// missing pod taken at the target on a scale-down and at 0 otherwise. No requests needed.
pub fn raw_resource_replicas(
    current: i32,
    target_milli: i64,
    resource: &str,
    obs: &Observation,
    now: Duration,
    tuning: &HpaTuning,
) -> Result<ResourceProposal, MetricError> {
    if target_milli <= 0 {
        return Err(MetricError::InvalidTarget);
    }
    let s = sample(resource, obs, now, tuning)?;
    if s.values.is_empty() {
        return Err(MetricError::NoReadyMetrics);
    }
    let (ratio, average) = average_ratio(&s.values, target_milli);
    let ready_pods = s.groups.ready;
    let replicas = replicas_from_ratio(
        current,
        ratio,
        s,
        tuning,
        |_, ratio| Some(if ratio < 1.0 { target_milli } else { 0 }),
        |values| Ok(average_ratio(values, target_milli).0),
    )?;
    Ok(ResourceProposal {
        replicas,
        utilization: None,
        raw_average_milli: average,
        usage_ratio: ratio,
        ready_pods,
    })
}

/// `ceil` into `i32`, saturating.
pub(crate) fn ceil_replicas(v: f64) -> i32 {
    if v.is_nan() {
        return 0;
    }
    v.ceil().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}
