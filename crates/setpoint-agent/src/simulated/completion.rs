//! Pods of simulated nodes that run to completion: a pod whose `restartPolicy` is `Never` or
//! `OnFailure` (a Job's pod, say) "runs" for a while after it is marked `Running`, then every
//! container "exits". Two annotations on the pod set how:
//!
//! - [`RUN_TIME`] (`setpoint.dev/simulated-run-time`): how long it runs — a number with a unit
//!   `ms`, `s`, `m` or `h` (`"250ms"`, `"2s"`); default [`DEFAULT_RUN_TIME`].
//! - [`EXIT_CODE`] (`setpoint.dev/simulated-exit-code`): the containers' exit code; default
//!   `0`. Zero ends the pod `Succeeded`; non-zero ends it `Failed` under `Never`, and under
//!   `OnFailure` restarts the containers in place (`restartCount` goes up, the pod runs again),
//!   as the kubelet does.
//!
//! Pods under `restartPolicy: Always` (the default) run until deleted, as before.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Annotation: how long the pod runs before its containers exit.
pub const RUN_TIME: &str = "setpoint.dev/simulated-run-time";
/// Annotation: the exit code of its containers.
pub const EXIT_CODE: &str = "setpoint.dev/simulated-exit-code";
/// How long a pod runs when [`RUN_TIME`] does not say.
pub(super) const DEFAULT_RUN_TIME: Duration = Duration::from_secs(1);

/// How a finishing pod ends, from its spec and annotations; `None` for a pod that runs until
/// deleted (`restartPolicy: Always`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    /// How long it runs.
    pub(super) time: Duration,
    /// Its containers' exit code.
    pub(super) exit_code: i32,
    /// Whether a failure restarts it in place (`OnFailure`) rather than ending it.
    pub(super) restarts: bool,
}

/// The run of `pod`, if it finishes at all.
pub(super) fn run_of(pod: &Pod) -> Option<Run> {
    let policy = pod.spec.as_ref()?.restart_policy.as_deref();
    let restarts = match policy {
        Some("Never") => false,
        Some("OnFailure") => true,
        _ => return None,
    };
    let annotation = |key| {
        pod.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    };
    let time = annotation(RUN_TIME)
        .and_then(parse_duration)
        .unwrap_or(DEFAULT_RUN_TIME);
    let exit_code = annotation(EXIT_CODE)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Some(Run {
        time,
        exit_code,
        restarts,
    })
}

/// Parses `250ms`, `2s`, `1.5s`, `3m`, `1h` (a bare number is seconds).
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

/// The status of `pod` (as `running` shows it) once its containers exited with `exit_code`
/// at `now`: `Succeeded` or `Failed`, containers terminated, `Ready` and `ContainersReady`
/// false.
pub(super) fn finished_status(running: &PodStatus, exit_code: i32, now: &Time) -> PodStatus {
    let mut status = running.clone();
    status.phase = Some(
        if exit_code == 0 {
            "Succeeded"
        } else {
            "Failed"
        }
        .to_owned(),
    );
    let reason = if exit_code == 0 { "Completed" } else { "Error" };
    for c in status.container_statuses.iter_mut().flatten() {
        terminate(c, exit_code, reason, now);
    }
    for cond in status.conditions.iter_mut().flatten() {
        if cond.type_ == "Ready" || cond.type_ == "ContainersReady" {
            set_false(cond, "PodCompleted", now);
        }
    }
    status
}

/// The status of a pod restarted in place after its containers exited with `exit_code`:
/// still `Running`, each container's `restartCount` one higher and its last state terminated.
pub(super) fn restarted_status(running: &PodStatus, exit_code: i32, now: &Time) -> PodStatus {
    let mut status = running.clone();
    for c in status.container_statuses.iter_mut().flatten() {
        let mut last = c.clone();
        terminate(&mut last, exit_code, "Error", now);
        c.last_state = last.state;
        c.restart_count += 1;
    }
    status
}

fn terminate(c: &mut ContainerStatus, exit_code: i32, reason: &str, now: &Time) {
    let started_at = c
        .state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.clone());
    c.ready = false;
    c.started = Some(false);
    c.state = Some(ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code,
            reason: Some(reason.to_owned()),
            started_at,
            finished_at: Some(now.clone()),
            container_id: c.container_id.clone(),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    });
}

fn set_false(cond: &mut PodCondition, reason: &str, now: &Time) {
    cond.status = "False".to_owned();
    cond.reason = Some(reason.to_owned());
    cond.last_transition_time = Some(now.clone());
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerStateRunning, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::node::time_now;

    fn pod(policy: &str, annotations: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(policy.to_owned()),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn run_should_follow_restart_policy_and_annotations() {
        assert_eq!(run_of(&pod("Always", &[])), None);
        let run = run_of(&pod("Never", &[(RUN_TIME, "250ms"), (EXIT_CODE, "3")])).expect("run");
        assert_eq!(run.time, Duration::from_millis(250));
        assert_eq!((run.exit_code, run.restarts), (3, false));
        let run = run_of(&pod("OnFailure", &[(RUN_TIME, "nonsense")])).expect("run");
        assert_eq!(
            (run.time, run.exit_code, run.restarts),
            (DEFAULT_RUN_TIME, 0, true)
        );
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
    }

    #[test]
    fn finished_status_should_terminate_every_container() {
        let now = time_now();
        let running = PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                ready: true,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(now.clone()),
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        };
        let done = finished_status(&running, 2, &now);
        assert_eq!(done.phase.as_deref(), Some("Failed"));
        let c = &done.container_statuses.expect("statuses")[0];
        let t = c
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!((t.exit_code, t.reason.as_deref()), (2, Some("Error")));
        assert_eq!(done.conditions.expect("conditions")[0].status, "False");
        let again = restarted_status(&running, 1, &now);
        assert_eq!(again.phase.as_deref(), Some("Running"));
        assert_eq!(
            again.container_statuses.expect("statuses")[0].restart_count,
            1
        );
    }
}
