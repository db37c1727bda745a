//! A running container's probes, as the kubelet runs them: the startup probe first; liveness
//! and readiness only once it has succeeded (or if there is none). The worker is woken
//! whenever a result changes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Probe};
use tokio::sync::watch;

use super::slot::AbortOnDrop;
use crate::probes::{spawn_probe, ProbeHandle, ProbeKind, ProbeResult, ProbeTarget};

/// The probes of one container run. Dropping it stops them.
#[derive(Debug, Default)]
pub(crate) struct ContainerProbes {
    /// Set while some probe has not been started yet (liveness and readiness wait for the
    /// startup probe).
    pending: Option<Pending>,
    startup: Option<Running>,
    liveness: Option<Running>,
    readiness: Option<Running>,
}

struct Pending {
    target: ProbeTarget,
    liveness: Option<Probe>,
    readiness: Option<Probe>,
    notify: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("liveness", &self.liveness.is_some())
            .field("readiness", &self.readiness.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Running {
    results: watch::Receiver<ProbeResult>,
    _handle: ProbeHandle,
    _forwarder: AbortOnDrop,
}

impl Running {
    fn spawn(
        kind: ProbeKind,
        probe: Probe,
        target: ProbeTarget,
        notify: Arc<dyn Fn() + Send + Sync>,
    ) -> Running {
        let handle = spawn_probe(kind, probe, target);
        let results = handle.results();
        let mut changes = handle.results();
        let forwarder = tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                notify();
            }
        });
        Running {
            results,
            _handle: handle,
            _forwarder: AbortOnDrop(forwarder),
        }
    }

    fn result(&self) -> ProbeResult {
        self.results.borrow().clone()
    }
}

impl ContainerProbes {
    /// Starts the probes `container` declares against `target`; `notify` is called whenever
    /// a result changes.
    pub(crate) fn start(
        container: &Container,
        target: ProbeTarget,
        notify: Arc<dyn Fn() + Send + Sync>,
    ) -> ContainerProbes {
        let mut probes = ContainerProbes {
            pending: Some(Pending {
                target: target.clone(),
                liveness: container.liveness_probe.clone(),
                readiness: container.readiness_probe.clone(),
                notify: notify.clone(),
            }),
            ..ContainerProbes::default()
        };
        if let Some(probe) = container.startup_probe.clone() {
            probes.startup = Some(Running::spawn(ProbeKind::Startup, probe, target, notify));
        }
        probes.advance();
        probes
    }

    /// Starts liveness and readiness probes once the container has started.
    pub(crate) fn advance(&mut self) {
        if !self.started() {
            return;
        }
        if let Some(pending) = self.pending.take() {
            if let Some(probe) = pending.liveness {
                self.liveness = Some(Running::spawn(
                    ProbeKind::Liveness,
                    probe,
                    pending.target.clone(),
                    pending.notify.clone(),
                ));
            }
            if let Some(probe) = pending.readiness {
                self.readiness = Some(Running::spawn(
                    ProbeKind::Readiness,
                    probe,
                    pending.target,
                    pending.notify,
                ));
            }
        }
    }

    /// Past its startup probe (or it has none).
    pub(crate) fn started(&self) -> bool {
        self.startup
            .as_ref()
            .is_none_or(|p| matches!(p.result(), ProbeResult::Success))
    }

    /// Started, and passing its readiness probe (or it has none).
    pub(crate) fn ready(&self) -> bool {
        self.started()
            && self.pending.is_none()
            && self
                .readiness
                .as_ref()
                .is_none_or(|p| matches!(p.result(), ProbeResult::Success))
    }

    /// Why the container must be restarted, if a startup or liveness probe says so.
    pub(crate) fn failure(&self) -> Option<String> {
        for (what, probe) in [("Startup", &self.startup), ("Liveness", &self.liveness)] {
            if let Some(ProbeResult::Failure(message)) = probe.as_ref().map(Running::result) {
                return Some(format!("{what} probe failed: {message}"));
            }
        }
        None
    }
}
