//! Control laws and simulators for Setpoint, with no I/O and no async.
//!
//! - [`Pid`] / [`VelocityPid`]: a discrete PID controller done right (sample time folded into
//!   the gains, derivative on the measurement with an optional low-pass, integral with its
//!   gain inside, anti-windup, bumpless transfer, direct/reverse action, deadband).
//! - [`hpa`]: Kubernetes' HorizontalPodAutoscaler decision as a pure [`Recommender`].
//! - [`PidAutoscaler`]: a PID law on log-replicas as a [`Recommender`] with the same inputs,
//!   bounds and rate policies.
//! - [`plant`]: a deterministic autoscaling plant (load, pods that start late, a backlog, a
//!   metrics pipeline), and [`sim`]: scenarios that run recommenders against it, measure them
//!   and draw them ([`svg`]).
//!
//! See `docs/control.md` for the models, the metrics and the measured results.

mod error;
pub mod hpa;
mod observe;
mod pid;
mod pid_autoscaler;
pub mod plant;
mod rng;
pub mod sim;
pub mod svg;
mod velocity;

pub use error::{ConfigError, Result};
pub use observe::{
    Condition, ConditionStatus, ConditionType, CurrentValue, MetricValue, Observation, PodInfo,
    PodMetric, PodMetrics, PodPhase, ReadyCondition, Recommendation, Recommender,
};
pub use pid::{Action, IntegralGate, Mode, Pid, PidConfig, PidTerms};
pub use pid_autoscaler::{PidAutoscaler, PidAutoscalerConfig, Rounding};
pub use rng::SplitMix64;
pub use velocity::VelocityPid;
