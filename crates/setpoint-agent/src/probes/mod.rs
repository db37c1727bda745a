//! Container probes (startup, liveness, readiness), run as the kubelet runs them, against a
//! container that is a process on this host.
//!
//! [`spawn_probe`] starts one probe of one container run; its [`ProbeHandle`] publishes the
//! probe's [`ProbeResult`] and stops the probe when dropped. The result starts as the kubelet's
//! (readiness: not ready; liveness: alive; startup: unknown) and changes only after
//! `successThreshold` consecutive successes or `failureThreshold` consecutive failures. After a
//! liveness or startup probe has failed, it stops (the container is to be restarted, and a new
//! run gets new probes); after a startup probe has succeeded, it stops too (the container has
//! started for good).
//!
//! Actions: `exec` runs the command on the host with the container's environment and working
//! directory (exit 0 = success; timing out = failure); `httpGet` sends a GET (HTTPS without
//! verifying the certificate, as the kubelet does) and takes 200–399 as success; `tcpSocket`
//! succeeds when a connection opens. `grpc` is not supported and always fails, saying so.

mod action;
pub(crate) mod http;
mod runner;

use std::net::IpAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, Probe};
use tokio::sync::watch;

use action::Action;
use runner::Timing;

/// Which of a container's probes this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeKind {
    /// Has the container started? Liveness and readiness wait for it; failing restarts it.
    Startup,
    /// Is the container alive? Failing restarts it.
    Liveness,
    /// May the container take traffic? Failing marks it not ready.
    Readiness,
}

impl ProbeKind {
    /// The result before the first decision, as the kubelet has it.
    fn initial(self) -> ProbeResult {
        match self {
            ProbeKind::Startup => ProbeResult::Unknown,
            ProbeKind::Liveness => ProbeResult::Success,
            ProbeKind::Readiness => ProbeResult::Failure("not probed yet".to_owned()),
        }
    }
}

/// A probe's current verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProbeResult {
    /// No verdict yet (a startup probe before it has decided).
    Unknown,
    /// Passing.
    Success,
    /// Failing, with the last failure's message.
    Failure(String),
}

/// What a probe runs against: one container of a pod, running as processes on this host.
#[derive(Debug, Clone)]
pub(crate) struct ProbeTarget {
    /// Where `httpGet` and `tcpSocket` connect when the probe names no host: the pod's IP,
    /// which is the node's.
    pub(crate) host: IpAddr,
    /// The container (for its named ports).
    pub(crate) container: Container,
    /// The container's environment, for `exec`.
    pub(crate) env: Vec<(String, String)>,
    /// The container's working directory, for `exec`.
    pub(crate) working_dir: PathBuf,
}

/// A running probe. Dropping it stops the probe (and kills an `exec` probe's command).
#[derive(Debug)]
pub(crate) struct ProbeHandle {
    results: watch::Receiver<ProbeResult>,
    task: tokio::task::JoinHandle<()>,
}

impl ProbeHandle {
    /// The probe's verdicts: the current one, and a change notification for each new one.
    pub(crate) fn results(&self) -> watch::Receiver<ProbeResult> {
        self.results.clone()
    }
}

impl Drop for ProbeHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts `probe` of kind `kind` against `target`. Must be called within a Tokio runtime.
pub(crate) fn spawn_probe(kind: ProbeKind, probe: Probe, target: ProbeTarget) -> ProbeHandle {
    let timing = Timing::of(&probe);
    let action = Action::of(&probe, &target);
    let (tx, results) = watch::channel(kind.initial());
    let task = tokio::spawn(runner::run(
        kind,
        timing,
        move || action.clone().check(),
        tx,
    ));
    ProbeHandle { results, task }
}

#[cfg(test)]
mod tests;
