//! One pod's worker: a task that drives the pod's containers to its spec and reports its
//! status, woken by every change of the pod, every exit of one of its containers, every change
//! of a probe result, and a periodic resync. Level-triggered: each sync looks at the whole
//! state and does what is missing, so running it again changes nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod adoption;
mod network;
mod pid_namespace;
mod run_spec;
mod termination;

use self::run_spec::Prepared;
use self::termination::{grace_period, MIN_GRACE};
use super::backoff::CrashBackoff;
use super::probing::ContainerProbes;
use super::slot::{AbortOnDrop, Run, Slot};
use super::status::{merge_is_noop, phase, pod_status, StatusInput};
use super::{PodContext, PodUpdate};
use crate::probes::ProbeTarget;
use crate::process::{find_latest_run, launch, now, FoundRun, Launched, ShimWatch};

/// How often a worker syncs without being woken.
const RESYNC: Duration = Duration::from_secs(10);
/// How soon a failed status write is retried.
const RETRY: Duration = Duration::from_secs(1);
/// How soon volumes that could not be prepared are tried again.
const MOUNT_RETRY: Duration = Duration::from_secs(2);

/// What wakes a worker besides pod updates.
#[derive(Debug)]
pub(super) enum Event {
    /// The shim of run `n` of `container` has exited.
    Exited {
        /// The container.
        container: String,
        /// The run.
        n: u32,
    },
    /// A probe result changed.
    Probe,
}

/// Which list a container is in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Which {
    Init,
    Main,
}

/// The worker's state. Invariant: `init` and `main` list the pod's init containers and
/// containers in spec order once `loaded`.
struct Worker {
    ctx: Arc<PodContext>,
    uid: String,
    dir: PathBuf,
    /// `name_namespace(uid)` (the directory's name until the pod is seen), for messages.
    label: String,
    loaded: bool,
    init: Vec<Slot>,
    main: Vec<Slot>,
    backoff: CrashBackoff,
    events: mpsc::UnboundedReceiver<Event>,
    events_tx: mpsc::UnboundedSender<Event>,
    /// The last status the worker wrote.
    last_status: Option<serde_json::Value>,
    /// When the worker first saw the pod: its `startTime`.
    first_seen: Time,
    /// An init container failed and the pod does not restart: the pod has failed.
    init_failed: bool,
    /// The pod has reached Succeeded or Failed: nothing is started any more.
    terminal: bool,
    /// The pod is being deleted and its processes are stopped: the worker asked the API to
    /// remove it.
    delete_done: bool,
    /// The pod's volumes, once prepared.
    volumes: Option<crate::volumes::PodVolumes>,
    /// The last error preparing them (reported once per distinct message).
    mount_error: Option<String>,
    /// Notes about the volumes already reported as events.
    volume_notes: std::collections::BTreeSet<String>,
    /// The pod's own network, once set up (bridge mode, not `hostNetwork`).
    pod_network: Option<crate::network::PodNetwork>,
    /// The last error setting it up (reported once per distinct message).
    network_error: Option<String>,
    /// The pod's PID namespace (`shareProcessNamespace: true`), once made.
    pid_namespace: Option<crate::shim::pid_namespace::PidNamespace>,
    /// Whether the pod was told its `shareProcessNamespace` is not honoured.
    pid_namespace_noted: bool,
    /// The last error making it (reported once per distinct message).
    pid_namespace_error: Option<String>,
}

/// Runs the worker of pod `uid` (directory `dir`) until the pod is gone from the API and its
/// processes are stopped, or until `shutdown` (then its processes keep running). Returns
/// whether the pod is done with.
pub(super) async fn pod_worker(
    ctx: Arc<PodContext>,
    uid: String,
    dir: PathBuf,
    mut updates: watch::Receiver<PodUpdate>,
    shutdown: CancellationToken,
) -> bool {
    let (events_tx, events) = mpsc::unbounded_channel();
    let label = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut worker = Worker {
        ctx,
        uid,
        dir,
        label,
        loaded: false,
        init: Vec::new(),
        main: Vec::new(),
        backoff: CrashBackoff::default(),
        events,
        events_tx,
        last_status: None,
        first_seen: now(),
        init_failed: false,
        terminal: false,
        delete_done: false,
        volumes: None,
        mount_error: None,
        volume_notes: std::collections::BTreeSet::new(),
        pod_network: None,
        network_error: None,
        pid_namespace: None,
        pid_namespace_noted: false,
        pid_namespace_error: None,
    };
    loop {
        let next = tokio::select! {
            biased;
            () = shutdown.cancelled() => return false,
            next = worker.sync(&mut updates) => next,
        };
        let Some(wake) = next else {
            return true;
        };
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return false,
            changed = updates.changed() => {
                if changed.is_err() {
                    return false;
                }
            }
            Some(event) = worker.events.recv() => worker.handle(event),
            () = tokio::time::sleep_until(wake) => {}
        }
        while let Ok(event) = worker.events.try_recv() {
            worker.handle(event);
        }
    }
}

impl Worker {
    /// One sync; `None` once the pod is gone and its processes stopped, else when to sync
    /// again at the latest.
    async fn sync(&mut self, updates: &mut watch::Receiver<PodUpdate>) -> Option<Instant> {
        let update = updates.borrow_and_update().clone();
        let pod = match update {
            PodUpdate::Removed => {
                if !self.loaded {
                    self.load_from_disk();
                }
                self.stop_all(MIN_GRACE, None).await;
                crate::volumes::teardown(&self.dir);
                self.ctx.volumes.sources.tokens.forget_pod(&self.uid);
                self.remove_pid_namespace().await;
                self.remove_network().await;
                if let Err(e) = std::fs::remove_dir_all(&self.dir) {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "removing a deleted pod's directory");
                }
                return None;
            }
            PodUpdate::Present(pod) => pod,
        };
        if !self.loaded {
            // Before adopting running containers: their probes go to the pod's address.
            self.adopt_network(&pod).await;
            self.load(&pod);
        }
        if pod.metadata.deletion_timestamp.is_some() {
            if !self.delete_done {
                self.terminate_and_delete(&pod).await;
            }
            return Some(Instant::now() + if self.delete_done { RESYNC } else { RETRY });
        }
        let mut wake = Instant::now() + RESYNC;
        if !self.terminal {
            let networked =
                self.ensure_network(&pod).await && self.ensure_pid_namespace(&pod).await;
            let mounted = self.prepare_volumes(&pod).await;
            self.check_probes(&pod);
            if !networked {
                wake = wake.min(Instant::now() + MOUNT_RETRY);
            } else if mounted {
                self.drive(&pod, &mut wake).await;
            } else {
                wake = wake.min(Instant::now() + MOUNT_RETRY);
            }
        }
        if !self.report(&pod, None).await {
            wake = wake.min(Instant::now() + RETRY);
        }
        self.release_network_when_finished().await;
        self.release_pid_namespace_when_finished().await;
        Some(wake)
    }

    /// Prepares (or refreshes) the pod's volumes; reports failures and notes as events.
    /// Returns whether containers may be started: the volumes were prepared, now or before
    /// (a failed refresh keeps the containers on the data they have, as the kubelet does).
    async fn prepare_volumes(&mut self, pod: &Arc<Pod>) -> bool {
        let prepared =
            crate::volumes::prepare(&self.ctx.volumes, pod, &self.dir, self.volumes.as_ref()).await;
        match prepared {
            Ok(mut prepared) => {
                self.mount_error = None;
                let mounts_anything = pod.spec.iter().any(|s| {
                    s.containers
                        .iter()
                        .chain(s.init_containers.iter().flatten())
                        .any(|c| c.volume_mounts.as_ref().is_some_and(|m| !m.is_empty()))
                });
                if mounts_anything && !self.ctx.volumes.mounts {
                    prepared.notes.push("mounts are emulated: the agent cannot mount (not root, or told not to), so containers find their volumes through SETPOINT_MOUNT_* environment variables".to_owned());
                }
                for note in prepared.notes {
                    if self.volume_notes.insert(note.clone()) {
                        let reason = if note.starts_with("mounts are emulated") {
                            "MountsEmulated"
                        } else {
                            "VolumeNotSupported"
                        };
                        self.ctx.events.publish_for(
                            &**pod,
                            setpoint_runtime::EventDetails::warning(reason, "Mount")
                                .with_note(note),
                        );
                    }
                }
                self.volumes = Some(prepared.volumes);
                true
            }
            Err(e) => {
                if self.mount_error.as_deref() != Some(e.0.as_str()) {
                    tracing::info!(pod = %self.label, error = %e, "preparing the pod's volumes");
                    self.ctx.events.publish_for(
                        &**pod,
                        setpoint_runtime::EventDetails::warning("FailedMount", "Mount")
                            .with_note(format!("MountVolume.SetUp failed: {e}")),
                    );
                    self.mount_error = Some(e.0);
                }
                self.volumes.is_some()
            }
        }
    }

    fn handle(&mut self, event: Event) {
        let Event::Exited { container, n } = event else {
            return;
        };
        let dir = self.dir.clone();
        let Some(slot) = self.slot_named(&container) else {
            return;
        };
        if !matches!(&slot.latest, Some((m, Run::Running { .. })) if *m == n) {
            return;
        }
        let exit = match find_latest_run(&dir, &container) {
            Some((m, FoundRun::Exited(exit), _)) if m == n => exit,
            _ => return,
        };
        let mut exit = exit;
        if let Some(because) = slot.stopping_because.take() {
            exit.message.get_or_insert(because);
        }
        tracing::debug!(container, n, code = exit.exit_code, "container exited");
        slot.latest = Some((
            n,
            Run::Exited {
                exit,
                at: Instant::now(),
            },
        ));
    }

    fn slot_named(&mut self, name: &str) -> Option<&mut Slot> {
        self.init
            .iter_mut()
            .chain(self.main.iter_mut())
            .find(|s| s.name == name)
    }

    fn slot_mut(&mut self, which: Which, i: usize) -> &mut Slot {
        match which {
            Which::Init => &mut self.init[i],
            Which::Main => &mut self.main[i],
        }
    }

    /// Builds the slots from the spec and adopts what earlier agents left running.
    fn load(&mut self, pod: &Pod) {
        self.loaded = true;
        self.label = format!(
            "{}_{}({})",
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            self.uid
        );
        let spec = pod.spec.clone().unwrap_or_default();
        let identity = serde_json::json!({
            "namespace": pod.metadata.namespace, "name": pod.metadata.name, "uid": self.uid,
        });
        if let Err(e) = crate::process::write_json(&self.dir.join("pod.json"), &identity) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "creating the pod's directory");
        }
        let _ = std::fs::create_dir_all(self.dir.join("work"));
        self.terminal = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        for (which, containers) in [
            (Which::Init, spec.init_containers.unwrap_or_default()),
            (Which::Main, spec.containers),
        ] {
            for container in containers {
                let slot = self.adopt(pod, Some(&container), container.name.clone());
                match which {
                    Which::Init => self.init.push(slot),
                    Which::Main => self.main.push(slot),
                }
            }
        }
    }

    fn watch_exit(&self, name: &str, n: u32, mut watch: ShimWatch) -> AbortOnDrop {
        let tx = self.events_tx.clone();
        let container = name.to_owned();
        AbortOnDrop(tokio::spawn(async move {
            watch.exited().await;
            let _ = tx.send(Event::Exited { container, n });
        }))
    }

    fn probes(
        &self,
        container: &Container,
        env: Vec<(String, String)>,
        working_dir: PathBuf,
    ) -> ContainerProbes {
        let tx = self.events_tx.clone();
        let target = ProbeTarget {
            host: self.pod_ip(),
            container: container.clone(),
            env,
            working_dir,
        };
        ContainerProbes::start(
            container,
            target,
            Arc::new(move || {
                let _ = tx.send(Event::Probe);
            }),
        )
    }

    /// Stops containers whose startup or liveness probe failed (they are restarted as if they
    /// had failed), and starts liveness and readiness probes of containers that have started.
    fn check_probes(&mut self, pod: &Pod) {
        let grace = grace_period(pod, false);
        for slot in self.init.iter_mut().chain(self.main.iter_mut()) {
            let Some((_, Run::Running { probes, .. })) = &mut slot.latest else {
                continue;
            };
            probes.advance();
            let Some(failure) = probes.failure() else {
                continue;
            };
            if slot.stopping_because.is_some() {
                continue;
            }
            tracing::info!(pod = %self.label, container = %slot.name, %failure, "restarting a container");
            slot.stopping_because = Some(failure);
            if let Some(process) = slot.running_process() {
                let _ = process.signal_group(rustix::process::Signal::TERM);
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    let _ = process.signal_group(rustix::process::Signal::KILL);
                });
            }
        }
    }

    /// Starts what should run: init containers one at a time in order, each to success; then
    /// every container; restarts per the restart policy, within crash-loop back-off.
    async fn drive(&mut self, pod: &Arc<Pod>, wake: &mut Instant) {
        let policy = restart_policy(pod);
        for i in 0..self.init.len() {
            let slot = &self.init[i];
            if slot.succeeded() {
                continue;
            }
            if slot.running_process().is_some() {
                return;
            }
            if slot.exit().is_some() && policy == "Never" {
                self.init_failed = true;
                return;
            }
            self.start_when_due(pod, Which::Init, i, wake).await;
            return;
        }
        for i in 0..self.main.len() {
            let slot = &self.main[i];
            if slot.running_process().is_some() {
                continue;
            }
            if let Some(exit) = slot.exit() {
                let restart = match policy {
                    "Always" => true,
                    "OnFailure" => exit.exit_code != 0,
                    _ => false,
                };
                if !restart {
                    continue;
                }
            }
            self.start_when_due(pod, Which::Main, i, wake).await;
        }
    }

    /// Starts container `i` now, or notes the back-off it waits in.
    async fn start_when_due(&mut self, pod: &Arc<Pod>, which: Which, i: usize, wake: &mut Instant) {
        let slot = self.slot_mut(which, i);
        if let Some((_, Run::Exited { at, .. })) = &slot.latest {
            let at = *at;
            let name = slot.name.clone();
            if let Some((when, delay)) = self.backoff.restart_at(&name, at) {
                self.slot_mut(which, i).backing_off = Some(delay);
                *wake = (*wake).min(when);
                return;
            }
        }
        self.slot_mut(which, i).backing_off = None;
        self.start(pod, which, i).await;
        if self.slot_mut(which, i).exit().is_some() {
            // It could not be started: try again at once (back-off permitting).
            *wake = Instant::now();
        }
    }

    /// Starts the next run of container `i`.
    async fn start(&mut self, pod: &Arc<Pod>, which: Which, i: usize) {
        let spec = pod.spec.as_ref();
        let container = match which {
            Which::Init => spec.and_then(|s| s.init_containers.as_ref()?.get(i).cloned()),
            Which::Main => spec.and_then(|s| s.containers.get(i).cloned()),
        };
        let Some(container) = container else {
            return;
        };
        let Some(Prepared {
            spec,
            paths,
            n,
            restarting,
            working_dir,
        }) = self.prepare_run(pod, which, i, &container).await
        else {
            return;
        };
        let launched = launch(&self.ctx.shim, &self.dir, &paths, &spec).await;
        if restarting {
            self.backoff.restarted(&container.name);
        }
        let run = match launched {
            Ok(Launched::Running(record, watch)) => {
                tracing::debug!(pod = %self.label, container = %container.name, n, pid = record.container_pid, "container started");
                // Before the status says so: a metrics request after `Running` includes it.
                self.ctx.metrics.container_started();
                Run::Running {
                    record,
                    _watcher: self.watch_exit(&container.name, n, watch),
                    probes: Box::new(self.probes(&container, spec.env, working_dir)),
                }
            }
            Ok(Launched::Failed(exit)) => Run::Exited {
                exit,
                at: Instant::now(),
            },
            Err(e) => {
                tracing::warn!(pod = %self.label, container = %container.name, error = %e, "starting a container");
                self.slot_mut(which, i).blocked =
                    Some(("RunContainerError".to_owned(), e.to_string()));
                return;
            }
        };
        let slot = self.slot_mut(which, i);
        if let Some((_, Run::Exited { exit, .. })) = slot.latest.take() {
            slot.previous = Some(exit);
        }
        slot.latest = Some((n, run));
        slot.stopping_because = None;
    }

    /// Writes the pod's status if it differs from the API's; `phase` overrides the computed
    /// one. Returns false if the write failed.
    async fn report(&mut self, pod: &Pod, phase_override: Option<&'static str>) -> bool {
        let init_done = self.init.iter().all(Slot::succeeded);
        let init: Vec<_> = self
            .init
            .iter()
            .map(|s| s.view("PodInitializing", &self.label))
            .collect();
        let waiting = if init_done {
            "ContainerCreating"
        } else {
            "PodInitializing"
        };
        let main: Vec<_> = self
            .main
            .iter()
            .map(|s| s.view(waiting, &self.label))
            .collect();
        let api_phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let phase = match (phase_override, api_phase) {
            (Some(p), _) => p,
            (None, Some("Succeeded")) if self.terminal => "Succeeded",
            (None, Some("Failed")) if self.terminal => "Failed",
            _ => phase(restart_policy(pod), &init, &main, self.init_failed),
        };
        if matches!(phase, "Succeeded" | "Failed") {
            self.terminal = true;
        }
        let mut pod_with_start = pod.clone();
        let status = pod_with_start.status.get_or_insert_with(Default::default);
        if status.start_time.is_none() {
            status.start_time = Some(self.first_seen.clone());
        }
        let status = pod_status(&StatusInput {
            pod: &pod_with_start,
            init: &init,
            containers: &main,
            phase,
            node_ip: self.ctx.node_ip,
            pod_ip: self.reported_pod_ip(pod),
            now: now(),
        });
        let Ok(value) = serde_json::to_value(&status) else {
            return true;
        };
        let current = serde_json::to_value(&pod.status).unwrap_or_default();
        if self.last_status.as_ref() == Some(&value) || merge_is_noop(&current, &value) {
            return true;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api = self.ctx.client.namespaced_api::<Pod>(&namespace);
        let patch = Patch::Merge(serde_json::json!({ "status": value }));
        match api
            .patch_status(&name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => {
                self.last_status = Some(value);
                true
            }
            Err(e) => {
                tracing::warn!(pod = %self.label, error = %e, "writing the pod's status");
                self.last_status = None;
                false
            }
        }
    }
}

/// The pod's restart policy (`Always` when unset).
fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}
