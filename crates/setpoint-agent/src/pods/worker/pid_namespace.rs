//! The worker's part of `shareProcessNamespace: true`: the pod's PID namespace (its init,
//! `shim/pid_namespace.rs`) made before its containers start, adopted after an agent restart
//! (the init's record in the pod directory), stopped with the pod. Only where the agent makes
//! mount namespaces (root, mounts not turned off): elsewhere the containers keep the host's
//! PID namespace and the pod gets one Warning event saying so.

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::Worker;
use crate::shim::pid_namespace::{start_pod_init, PidNamespace, RECORD_FILE};

fn shares_processes(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false)
}

impl Worker {
    fn pid_namespace_record(&self) -> PathBuf {
        self.dir.join(RECORD_FILE)
    }

    /// Makes sure a pod asking for a shared PID namespace has it (or is told it cannot);
    /// false while it cannot be made: no container starts outside it.
    pub(super) async fn ensure_pid_namespace(&mut self, pod: &Arc<Pod>) -> bool {
        if !shares_processes(pod) {
            return true;
        }
        if !self.ctx.volumes.mounts {
            if !self.pid_namespace_noted {
                self.pid_namespace_noted = true;
                self.ctx.events.publish_for(
                    &**pod,
                    setpoint_runtime::EventDetails::warning("ShareProcessNamespaceNotHonoured", "Sandbox")
                        .with_note("shareProcessNamespace is not honoured: the agent cannot make namespaces (not root, or mounts turned off), so the containers see the node's processes".to_owned()),
                );
            }
            return true;
        }
        if self.pid_namespace.is_some_and(|ns| ns.is_alive()) {
            return true;
        }
        let shim = self.ctx.shim.clone();
        let record = self.pid_namespace_record();
        let started = tokio::task::spawn_blocking(move || start_pod_init(&shim, &record)).await;
        let error = match started {
            Ok(Ok(ns)) => {
                self.pid_namespace = Some(ns);
                self.pid_namespace_error = None;
                return true;
            }
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        if self.pid_namespace_error.as_deref() != Some(error.as_str()) {
            tracing::warn!(pod = %self.label, %error, "making the pod's PID namespace");
            self.ctx.events.publish_for(
                &**pod,
                setpoint_runtime::EventDetails::warning("FailedCreatePodSandBox", "Sandbox")
                    .with_note(format!("Failed to create pod sandbox: {error}")),
            );
            self.pid_namespace_error = Some(error);
        }
        false
    }

    /// The namespace the pod's containers join, if any.
    pub(super) fn run_pid_namespace(&self) -> Option<PidNamespace> {
        self.pid_namespace
    }

    /// Stops the pod's init (its containers are stopped: anything left in the namespace dies
    /// with it) and forgets its record, also one left by an earlier agent.
    pub(super) async fn remove_pid_namespace(&mut self) {
        let record = self.pid_namespace_record();
        let known = self.pid_namespace.take();
        let _ = tokio::task::spawn_blocking(move || {
            let recorded = crate::process::read_json::<PidNamespace>(&record)
                .ok()
                .flatten();
            for ns in known.into_iter().chain(recorded) {
                ns.stop();
            }
            let _ = std::fs::remove_file(&record);
        })
        .await;
    }

    /// Stops the init of a pod that has finished (nothing of it runs any more).
    pub(super) async fn release_pid_namespace_when_finished(&mut self) {
        if self.terminal
            && (self.pid_namespace.is_some() || self.pid_namespace_record().exists())
            && self
                .init
                .iter()
                .chain(self.main.iter())
                .all(|s| s.running_process().is_none())
        {
            self.remove_pid_namespace().await;
        }
    }
}
