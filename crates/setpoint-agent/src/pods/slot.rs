//! What the agent knows of one container of a pod: its latest run and the one before, why it
//! cannot start if it cannot, and the back-off it waits in.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::status::{ContainerView, StateView};
use crate::process::{ExitRecord, ProcessId, RunRecord};

/// One container (init or regular) of a pod.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The container's name (unique among a pod's init and regular containers).
    pub(crate) name: String,
    /// Its image, recorded only.
    pub(crate) image: String,
    /// Run number and state of its latest run; `None` before the first. The run number is
    /// the container's restart count.
    pub(crate) latest: Option<(u32, Run)>,
    /// How the run before `latest` ended.
    pub(crate) previous: Option<ExitRecord>,
    /// Why it cannot be started now (`reason`, `message`), e.g. `CreateContainerConfigError`.
    pub(crate) blocked: Option<(String, String)>,
    /// Set while the latest run has exited and the restart waits for this back-off.
    pub(crate) backing_off: Option<Duration>,
    /// Why the agent is stopping the latest run, if it is (e.g. a failed liveness probe):
    /// becomes the message of its exit.
    pub(crate) stopping_because: Option<String>,
}

/// A run's state.
#[derive(Debug)]
pub(crate) enum Run {
    /// Its shim is alive.
    Running {
        /// Pids and start time.
        record: RunRecord,
        /// The task waiting for the shim's exit; aborted when the slot goes.
        _watcher: AbortOnDrop,
        /// The container's probes (stopped when dropped).
        probes: Box<super::probing::ContainerProbes>,
    },
    /// It has ended.
    Exited {
        /// How.
        exit: ExitRecord,
        /// When the agent learned it (the clock back-off counts on).
        at: Instant,
    },
}

/// A task aborted when this handle is dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Slot {
    /// A container that has not run (yet, as far as this agent knows).
    pub(crate) fn new(name: String, image: String) -> Slot {
        Slot {
            name,
            image,
            latest: None,
            previous: None,
            blocked: None,
            backing_off: None,
            stopping_because: None,
        }
    }

    /// The container's process while it runs.
    pub(crate) fn running_process(&self) -> Option<ProcessId> {
        match &self.latest {
            Some((_, Run::Running { record, .. })) => Some(ProcessId {
                pid: record.container_pid,
                start_time: record.container_start_time,
            }),
            _ => None,
        }
    }

    /// The latest run's exit, if it has ended.
    pub(crate) fn exit(&self) -> Option<&ExitRecord> {
        match &self.latest {
            Some((_, Run::Exited { exit, .. })) => Some(exit),
            _ => None,
        }
    }

    /// Whether the latest run ended with exit code 0.
    pub(crate) fn succeeded(&self) -> bool {
        self.exit().is_some_and(|e| e.exit_code == 0)
    }

    /// What the status says of this container; `waiting_reason` is the reason it waits if it
    /// has not run (`ContainerCreating` or `PodInitializing`); `pod` names the pod in
    /// back-off messages.
    pub(crate) fn view(&self, waiting_reason: &str, pod: &str) -> ContainerView {
        let restart_count = self.latest.as_ref().map_or(0, |(n, _)| *n);
        let container_id = match &self.latest {
            Some((_, Run::Running { record, .. })) => {
                Some(format!("setpoint://{}", record.container_pid))
            }
            _ => None,
        };
        let (state, last, started, ready) = match (&self.latest, &self.blocked) {
            (_, Some((reason, message))) if self.running_process().is_none() => (
                StateView::Waiting {
                    reason: reason.clone(),
                    message: Some(message.clone()),
                },
                self.exit().cloned().or_else(|| self.previous.clone()),
                false,
                false,
            ),
            (None, _) => (
                StateView::Waiting {
                    reason: waiting_reason.to_owned(),
                    message: None,
                },
                None,
                false,
                false,
            ),
            (Some((_, Run::Running { record, probes, .. })), _) => (
                StateView::Running {
                    started_at: record.started_at.clone(),
                },
                self.previous.clone(),
                probes.started(),
                probes.ready(),
            ),
            (Some((_, Run::Exited { exit, .. })), _) => match self.backing_off {
                Some(delay) => (
                    StateView::Waiting {
                        reason: "CrashLoopBackOff".to_owned(),
                        message: Some(format!(
                            "back-off {}s restarting failed container={} pod={pod}",
                            delay.as_secs(),
                            self.name
                        )),
                    },
                    Some(exit.clone()),
                    false,
                    false,
                ),
                None => (
                    StateView::Terminated(exit.clone()),
                    self.previous.clone(),
                    false,
                    false,
                ),
            },
        };
        ContainerView {
            name: self.name.clone(),
            image: self.image.clone(),
            state,
            last,
            restart_count,
            container_id,
            started,
            ready,
        }
    }
}
