//! Termination: a deleted pod's containers get their preStop hooks, SIGTERM, and SIGKILL
//! after the grace period; then the final status is reported and the pod object removed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Preconditions};
use tokio::time::Instant;

use super::super::slot::{Run, Slot};
use super::Worker;
use crate::process::{read_json, RunPaths, RunSpec};

/// The shortest grace period a container gets (the kubelet's minimum).
pub(super) const MIN_GRACE: Duration = Duration::from_secs(2);
/// The longest grace period a container gets: grace periods are client input of any size
/// (kube-apiserver accepts `terminationGracePeriodSeconds` up to 2^63 − 1), and a deadline
/// must stay within what the clock can represent. Thirty years is as good as never.
const MAX_GRACE: Duration = Duration::from_secs(86_400 * 365 * 30);
/// How long the worker waits for shims to record exits after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(10);

impl Worker {
    /// Deletion: stops the processes within the grace period (preStop hooks, SIGTERM,
    /// SIGKILL), reports the final status, and removes the pod from the API.
    pub(super) async fn terminate_and_delete(&mut self, pod: &Arc<Pod>) {
        let grace = grace_period(pod, true);
        self.stop_all(grace, Some(pod)).await;
        let final_phase = if self.main.iter().all(Slot::succeeded) {
            "Succeeded"
        } else {
            "Failed"
        };
        if !self.terminal {
            self.report(pod, Some(final_phase)).await;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let api = self.ctx.client.namespaced_api::<Pod>(&namespace);
        match api.delete(&name, &params).await {
            Ok(_) => self.delete_done = true,
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                self.delete_done = true;
            }
            Err(e) => tracing::warn!(pod = %self.label, error = %e, "deleting a stopped pod"),
        }
    }

    /// Stops every running container: runs preStop hooks (with a pod), sends SIGTERM to each
    /// process group, SIGKILL to what is left after `grace`, and waits for the exits.
    pub(super) async fn stop_all(&mut self, grace: Duration, pod: Option<&Arc<Pod>>) {
        let running: Vec<(String, crate::process::ProcessId)> = self
            .init
            .iter()
            .chain(self.main.iter())
            .filter_map(|s| Some((s.name.clone(), s.running_process()?)))
            .collect();
        if running.is_empty() {
            return;
        }
        let now = Instant::now();
        let deadline = now.checked_add(grace.min(MAX_GRACE)).unwrap_or(now);
        if let Some(pod) = pod {
            let hooks = running.iter().filter_map(|(name, _)| {
                let container = pod
                    .spec
                    .as_ref()?
                    .containers
                    .iter()
                    .find(|c| &c.name == name)?;
                let hook = container.lifecycle.as_ref()?.pre_stop.clone()?;
                let n = self.slot_named_ref(name)?.latest.as_ref()?.0;
                let spec = read_json::<RunSpec>(&RunPaths::new(&self.dir, name, n).spec).ok()??;
                Some(super::super::hooks::run_pre_stop(
                    hook,
                    spec,
                    self.ctx.node_ip,
                    deadline,
                ))
            });
            futures::future::join_all(hooks.collect::<Vec<_>>()).await;
        }
        for (_, process) in &running {
            let _ = process.signal_group(rustix::process::Signal::TERM);
        }
        let mut killed = false;
        let mut deadline = deadline;
        loop {
            let still: Vec<_> = self
                .init
                .iter()
                .chain(self.main.iter())
                .filter_map(Slot::running_process)
                .collect();
            if still.is_empty() {
                return;
            }
            tokio::select! {
                Some(event) = self.events.recv() => self.handle(event),
                () = tokio::time::sleep_until(deadline) => {
                    if killed {
                        tracing::warn!(pod = %self.label, "containers did not report their exit after SIGKILL");
                        return;
                    }
                    for slot in self.init.iter().chain(self.main.iter()) {
                        if let Some((_, Run::Running { record, .. })) = &slot.latest {
                            crate::process::kill_running(record);
                        }
                    }
                    killed = true;
                    deadline = Instant::now() + KILL_WAIT;
                }
            }
        }
    }

    fn slot_named_ref(&self, name: &str) -> Option<&Slot> {
        self.init
            .iter()
            .chain(self.main.iter())
            .find(|s| s.name == name)
    }
}

/// How long containers get between SIGTERM and SIGKILL: the deletion's grace period if the
/// pod is being deleted, else the spec's; at least [`MIN_GRACE`], at most [`MAX_GRACE`].
pub(super) fn grace_period(pod: &Pod, deleting: bool) -> Duration {
    let deletion = deleting
        .then_some(pod.metadata.deletion_grace_period_seconds)
        .flatten();
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds);
    let seconds = deletion.or(spec).unwrap_or(30);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0)).clamp(MIN_GRACE, MAX_GRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec_grace: i64, deletion_grace: Option<i64>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "deletionGracePeriodSeconds": deletion_grace},
            "spec": {
                "terminationGracePeriodSeconds": spec_grace,
                "containers": [{"name": "c"}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn grace_periods_should_stay_within_what_a_deadline_can_hold() {
        // Regression (issue 14.2): a grace period of 2^63 - 1 s overflowed `Instant + Duration`.
        assert_eq!(grace_period(&pod(i64::MAX, None), false), MAX_GRACE);
        assert_eq!(grace_period(&pod(30, Some(i64::MAX)), true), MAX_GRACE);
        assert_eq!(grace_period(&pod(30, Some(-5)), true), MIN_GRACE);
        assert_eq!(
            grace_period(&pod(30, Some(10)), true),
            Duration::from_secs(10)
        );
        assert!(Instant::now().checked_add(MAX_GRACE).is_some());
    }
}
