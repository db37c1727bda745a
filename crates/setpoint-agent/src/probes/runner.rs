//! The probe loop: waits `initialDelaySeconds`, then attempts every `periodSeconds` with a
//! `timeoutSeconds` bound, and publishes a verdict after enough consecutive equal outcomes.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Probe;
use tokio::sync::watch;

use super::{ProbeKind, ProbeResult};

/// A probe's timing and thresholds, with the API's defaults and minimums applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timing {
    pub(super) initial_delay: Duration,
    /// At least 1s.
    pub(super) period: Duration,
    /// At least 1s.
    pub(super) timeout: Duration,
    /// At least 1.
    pub(super) success_threshold: u32,
    /// At least 1.
    pub(super) failure_threshold: u32,
}

impl Timing {
    pub(super) fn of(probe: &Probe) -> Timing {
        let seconds = |v: Option<i32>, default: i32, min: i32| {
            Duration::from_secs(v.unwrap_or(default).max(min) as u64)
        };
        let count = |v: Option<i32>, default: i32| v.unwrap_or(default).max(1) as u32;
        Timing {
            initial_delay: seconds(probe.initial_delay_seconds, 0, 0),
            period: seconds(probe.period_seconds, 10, 1),
            timeout: seconds(probe.timeout_seconds, 1, 1),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }
    }
}

/// Consecutive equal outcomes so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Streak {
    None,
    Successes(u32),
    Failures(u32),
}

/// Runs `attempt` on `timing`'s schedule, publishing verdicts on `results`, until a liveness or
/// startup probe fails, a startup probe succeeds, or the task is aborted.
pub(super) async fn run<F, Fut>(
    kind: ProbeKind,
    timing: Timing,
    mut attempt: F,
    results: watch::Sender<ProbeResult>,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    tokio::time::sleep(timing.initial_delay).await;
    let mut ticks = tokio::time::interval(timing.period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut streak = Streak::None;
    loop {
        ticks.tick().await;
        let outcome = match tokio::time::timeout(timing.timeout, attempt()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("timed out after {}s", timing.timeout.as_secs())),
        };
        let verdict = match outcome {
            Ok(()) => {
                let n = match streak {
                    Streak::Successes(n) => n + 1,
                    _ => 1,
                };
                streak = Streak::Successes(n);
                (n >= timing.success_threshold).then_some(ProbeResult::Success)
            }
            Err(message) => {
                tracing::debug!(?kind, %message, "probe attempt failed");
                let n = match streak {
                    Streak::Failures(n) => n + 1,
                    _ => 1,
                };
                streak = Streak::Failures(n);
                (n >= timing.failure_threshold).then_some(ProbeResult::Failure(message))
            }
        };
        let Some(verdict) = verdict else { continue };
        results.send_if_modified(|current| {
            let changed = std::mem::discriminant(current) != std::mem::discriminant(&verdict);
            if changed {
                *current = verdict.clone();
            }
            changed
        });
        match (kind, &verdict) {
            (ProbeKind::Liveness | ProbeKind::Startup, ProbeResult::Failure(_))
            | (ProbeKind::Startup, ProbeResult::Success) => return,
            _ => {}
        }
    }
}
