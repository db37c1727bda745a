//! A PID autoscaling law as a pure [`Recommender`], with the HPA's inputs, bounds and rate
//! policies.
//!
//! The law works in log space, where the plant is linear: with load `λ` and `r` replicas,
//! utilisation is `∝ λ/r`, so `ln(metric/target) = ln λ − ln r + c`. The state is a
//! continuous log-replica count `x`; each sample (one call per `period`):
//! 1. the measurement is `y = ln(usage ratio)`, the usage ratio being the HPA's
//!    (`utilisation of ready pods / target`; `value / target` for an `Object` or `External`
//!    `Value` target, `value / (target × replicas)` for an `AverageValue` one), the largest
//!    over the metrics;
//! 2. a [`Pid`] in reverse action with set-point 0 computes `x = P + I + D` with gains per
//!    sample (`Kp`, `Ki`, `Kd` dimensionless), derivative on `y`, a deadband on `|y|`, and `x`
//!    clamped to `[ln min, ln max]`;
//! 3. while new pods are not yet ready (spec replicas above ready pods) the integral may not
//!    rise — the capacity asked for is on its way, and integrating the error it has not yet
//!    removed is what makes the HPA overshoot;
//! 4. `exp(x)` is rounded (nearest with hysteresis, or ceil) and bounded by the same rate
//!    policies and min/max as the HPA; when a bound cuts it, the integral is re-based to the
//!    applied value (anti-windup by back-calculation);
//! 5. if the observed replica count is not the one this law last applied (first call, or
//!    someone else scaled), the state is re-synchronised to it without a bump.
//!
//! With `Kp = Kd = 0`, `Ki = 1`, ceil rounding, no deadband and the state quantised to the
//! applied count, one sample is `ceil(current × ratio)`: the HPA's own formula when every pod
//! is ready. The HPA is the pure-integral special case of this law.

use std::time::Duration;

use crate::error::{ConfigError, Result};
use crate::hpa::{propose, Behavior, HpaTuning, MetricTarget, RateLimiter, ResourceTarget};
use crate::observe::{ConditionType, Observation, Recommendation, Recommender};
use crate::pid::{Action, IntegralGate, Pid, PidConfig};

/// How the continuous replica count becomes an integer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rounding {
    /// Round up, as the HPA does.
    Ceil,
    /// Round to nearest, but move off the current count only when the continuous value is
    /// more than `0.5 + hysteresis` away from it.
    Nearest {
        /// Extra distance required to change, in replicas (e.g. 0.1).
        hysteresis: f64,
    },
}

/// Tuning of a [`PidAutoscaler`].
#[derive(Debug, Clone, PartialEq)]
pub struct PidAutoscalerConfig {
    /// Proportional gain (log-replicas per unit of log usage ratio).
    pub kp: f64,
    /// Integral gain per sample (1 = the HPA's).
    pub ki: f64,
    /// Derivative gain in samples.
    pub kd: f64,
    /// Low-pass time constant on D, in samples (0 = none).
    pub derivative_filter: f64,
    /// Errors `|ln ratio|` at most this count as zero.
    pub deadband: f64,
    /// The sample period (the sync period; 15 s).
    pub period: Duration,
    /// `minReplicas`.
    pub min_replicas: i32,
    /// `maxReplicas`.
    pub max_replicas: i32,
    /// The metrics, as the HPA's.
    pub metrics: Vec<MetricTarget>,
    /// Rate policies (the stabilization windows are not used: the law does its own damping).
    pub behavior: Behavior,
    /// Pod grouping rules (readiness, initialisation period), as the HPA's.
    pub tuning: HpaTuning,
    /// Integer rounding.
    pub rounding: Rounding,
    /// Freeze upward integration while new pods are not ready.
    pub freeze_while_starting: bool,
    /// Measure against the capacity asked for, not the capacity ready: the usage ratio is
    /// scaled by `ready / spec replicas`, predicting the utilisation once starting pods serve
    /// (the HPA does the same by counting unready pods at 0 % on a scale-up).
    pub predict_pending: bool,
    /// Hold (no update at all) while the newest metric window began before the last change
    /// of serving capacity (a pod became ready, or this law scaled down): such a sample mixes
    /// two capacities and would be acted on twice.
    pub fresh_metrics_only: bool,
    /// Carry the applied integer (not the continuous value) into the next sample.
    pub quantized_state: bool,
}

impl PidAutoscalerConfig {
    /// The tuned defaults for one CPU target (see `docs/control.md`).
    pub fn cpu(min_replicas: i32, max_replicas: i32, target_utilization: i32) -> Self {
        PidAutoscalerConfig {
            kp: 0.2,
            ki: 0.4,
            kd: 0.1,
            derivative_filter: 0.0,
            deadband: 0.065,
            period: Duration::from_secs(15),
            min_replicas,
            max_replicas,
            metrics: vec![ResourceTarget {
                resource: "cpu".into(),
                average_utilization: target_utilization,
            }
            .into()],
            behavior: Behavior::default(),
            tuning: HpaTuning::default(),
            rounding: Rounding::Nearest { hysteresis: 0.3 },
            freeze_while_starting: true,
            predict_pending: false,
            fresh_metrics_only: false,
            quantized_state: false,
        }
    }

    /// The HPA's formula as a PID: `Ki = 1`, nothing else.
    pub fn hpa_equivalent(min_replicas: i32, max_replicas: i32, target_utilization: i32) -> Self {
        PidAutoscalerConfig {
            kp: 0.0,
            ki: 1.0,
            kd: 0.0,
            deadband: 0.0,
            rounding: Rounding::Ceil,
            freeze_while_starting: false,
            predict_pending: false,
            fresh_metrics_only: false,
            quantized_state: true,
            ..Self::cpu(min_replicas, max_replicas, target_utilization)
        }
    }

    fn pid_config(&self) -> Result<PidConfig> {
        if self.min_replicas < 1 || self.max_replicas < self.min_replicas {
            return Err(ConfigError::Invalid(format!(
                "replicas bounds [{}, {}] must satisfy 1 <= min <= max",
                self.min_replicas, self.max_replicas
            )));
        }
        if self.metrics.is_empty() || self.metrics.iter().any(|m| !m.target_is_positive()) {
            return Err(ConfigError::Invalid("metrics need targets > 0".into()));
        }
        let t = self.period.as_secs_f64();
        if t <= 0.0 {
            return Err(ConfigError::Invalid("period must be > 0".into()));
        }
        if let Rounding::Nearest { hysteresis } = self.rounding {
            if !(0.0..0.5).contains(&hysteresis) {
                return Err(ConfigError::Invalid(
                    "hysteresis must be in [0, 0.5)".into(),
                ));
            }
        }
        let mut cfg = PidConfig::new(self.kp, self.ki / t, self.kd * t, t);
        cfg.derivative_filter = self.derivative_filter * t;
        cfg.deadband = self.deadband;
        cfg.action = Action::Reverse;
        cfg.output_min = f64::from(self.min_replicas).ln();
        cfg.output_max = f64::from(self.max_replicas).ln();
        cfg.validate()?;
        Ok(cfg)
    }
}

/// The PID autoscaling law, with its state between samples.
#[derive(Debug, Clone)]
pub struct PidAutoscaler {
    cfg: PidAutoscalerConfig,
    pid: Pid,
    limiter: RateLimiter,
    /// The replica count this law last recommended; `None` before the first sample.
    last_applied: Option<i32>,
    /// When this law last scaled down (capacity left at once).
    last_scale_down: Option<Duration>,
}

impl PidAutoscaler {
    /// A law with the given tuning.
    pub fn new(cfg: PidAutoscalerConfig) -> Result<Self> {
        let pid = Pid::new(cfg.pid_config()?)?;
        Ok(PidAutoscaler {
            cfg,
            pid,
            limiter: RateLimiter::default(),
            last_applied: None,
            last_scale_down: None,
        })
    }

    /// The tuning in force.
    pub fn config(&self) -> &PidAutoscalerConfig {
        &self.cfg
    }

    /// Whether the newest metric window began after the last capacity change.
    fn metrics_fresh(&self, obs: &Observation) -> bool {
        let last_ready = obs
            .live_pods()
            .filter(|p| p.is_ready())
            .filter_map(|p| p.ready.map(|c| c.last_transition))
            .max();
        let last_change = last_ready.max(self.last_scale_down);
        let window_start = obs
            .metrics
            .values()
            .flat_map(|m| m.values())
            .filter_map(|m| m.timestamp.checked_sub(m.window))
            .max();
        match (last_change, window_start) {
            (Some(change), Some(start)) => start >= change,
            _ => true,
        }
    }

    fn round(&self, current: i32, continuous: f64) -> i32 {
        let r = match self.cfg.rounding {
            Rounding::Ceil => (continuous - 1e-9).ceil(),
            Rounding::Nearest { hysteresis } => {
                if (continuous - f64::from(current)).abs() > 0.5 + hysteresis {
                    continuous.round()
                } else {
                    f64::from(current)
                }
            }
        };
        crate::hpa::ceil_replicas(r)
    }
}

impl Recommender for PidAutoscaler {
    fn name(&self) -> &str {
        "pid"
    }

    fn recommend(&mut self, now: Duration, obs: &Observation) -> Recommendation {
        let current = obs.spec_replicas;
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
            "the autoscaler was able to get the target's current scale",
        );
        if current <= 0 {
            rec.set_condition(
                ConditionType::ScalingActive,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            );
            return rec;
        }
        let Some((_, ratios)) = propose(
            &self.cfg.metrics,
            current,
            obs,
            now,
            &self.cfg.tuning,
            &mut rec,
        ) else {
            return rec;
        };
        let ratio = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ready = obs.ready_pods();
        let ratio = if self.cfg.predict_pending && ready > 0 && (ready as f64) < f64::from(current)
        {
            ratio * ready as f64 / f64::from(current)
        } else {
            ratio
        };
        // ln(0) is -inf: an idle target is treated as 1 % of its target; an `AverageValue`
        // target over zero replicas has an infinite ratio, bounded here.
        let y = if ratio.is_nan() {
            0.01f64.ln()
        } else {
            ratio.clamp(0.01, 1e6).ln()
        };
        let resync = self.last_applied != Some(current);
        if resync {
            self.pid.set_manual(f64::from(current.max(1)).ln());
            self.pid.set_automatic(y);
        } else if self.cfg.fresh_metrics_only && !self.metrics_fresh(obs) {
            rec.terms = Some(self.pid.terms());
            rec.set_condition(
                ConditionType::ScalingLimited,
                false,
                "DesiredWithinRange",
                "waiting for a metric window that began after the last capacity change",
            );
            return rec;
        }
        let starting =
            self.cfg.freeze_while_starting && ready < usize::try_from(current).unwrap_or(0);
        let gate = if starting {
            IntegralGate::NoIncrease
        } else {
            IntegralGate::Open
        };
        let terms = self.pid.update_gated(0.0, y, gate);
        let continuous = terms.output.exp();
        let rounded = self.round(current, continuous);
        rec.proposal = Some(rounded);
        let (desired, why) = self.limiter.limit(
            &self.cfg.behavior,
            current,
            rounded,
            self.cfg.min_replicas,
            self.cfg.max_replicas,
            now,
        );
        rec.set_condition(
            ConditionType::ScalingLimited,
            desired != rounded,
            why.reason(),
            why.message(),
        );
        if desired != rounded || self.cfg.quantized_state {
            self.pid.track_output(f64::from(desired).ln());
        }
        rec.terms = Some(self.pid.terms());
        rec.replicas = desired;
        self.last_applied = Some(desired);
        rec
    }

    fn record_scale(&mut self, now: Duration, from: i32, to: i32) {
        if to < from {
            self.last_scale_down = Some(now);
        }
        self.limiter.record(&self.cfg.behavior, now, from, to);
    }
}

#[cfg(test)]
mod tests;
