//! One pod's worker: a task that drives the pod's containers to its spec and reports its
//! status, woken by every change of the pod, every exit of one of its containers, every change
//! of a probe result, and a periodic resync. Level-triggered: each sync looks at the whole
//! state and does what is missing, so running it again changes nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::CrashBackoff;
use super::probing::ContainerProbes;
use super::slot::{AbortOnDrop, Run, Slot};
use super::status::{merge_is_noop, phase, pod_status, StatusInput};
use super::{env, PodContext, PodUpdate};
use crate::probes::ProbeTarget;
use crate::process::{
    find_latest_run, launch, now, read_json, FoundRun, Launched, RunPaths, RunSpec, ShimWatch,
};

/// How often a worker syncs without being woken.
const RESYNC: Duration = Duration::from_secs(10);
/// How soon a failed status write is retried.
const RETRY: Duration = Duration::from_secs(1);
/// The shortest grace period a container gets (the kubelet's minimum).
const MIN_GRACE: Duration = Duration::from_secs(2);
/// How long the worker waits for shims to record exits after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(10);

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
                if let Err(e) = std::fs::remove_dir_all(&self.dir) {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "removing a deleted pod's directory");
                }
                return None;
            }
            PodUpdate::Present(pod) => pod,
        };
        if !self.loaded {
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
            self.check_probes(&pod);
            self.drive(&pod, &mut wake).await;
        }
        if !self.report(&pod, None).await {
            wake = wake.min(Instant::now() + RETRY);
        }
        Some(wake)
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
        if let Err(e) = crate::process::write_json(&self.dir.join("pod.json"), &identity, false) {
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

    /// For a pod gone from the API: the containers its directory records.
    fn load_from_disk(&mut self) {
        self.loaded = true;
        let names: Vec<String> = std::fs::read_dir(self.dir.join("runs"))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        for name in names {
            let slot = self.adopt_unspecified(name);
            self.main.push(slot);
        }
    }

    fn adopt_unspecified(&mut self, name: String) -> Slot {
        let mut slot = Slot::new(name.clone(), String::new());
        if let Some((n, found, previous)) = find_latest_run(&self.dir, &name) {
            slot.previous = previous;
            slot.latest = Some((n, self.adopted_run(&name, n, found, None)));
        }
        slot
    }

    fn adopt(&mut self, pod: &Pod, container: Option<&Container>, name: String) -> Slot {
        let image = container.and_then(|c| c.image.clone()).unwrap_or_default();
        let mut slot = Slot::new(name.clone(), image);
        if let Some((n, found, previous)) = find_latest_run(&self.dir, &name) {
            slot.previous = previous;
            let probes = container.map(|c| (pod, c));
            slot.latest = Some((n, self.adopted_run(&name, n, found, probes)));
        }
        slot
    }

    fn adopted_run(
        &self,
        name: &str,
        n: u32,
        found: FoundRun,
        container: Option<(&Pod, &Container)>,
    ) -> Run {
        match found {
            FoundRun::Running(record, watch) => {
                tracing::info!(pod = %self.label, container = name, pid = record.container_pid, "adopted a running container");
                let probes = match container {
                    Some((_, c)) => {
                        let spec = read_json::<RunSpec>(&RunPaths::new(&self.dir, name, n).spec)
                            .ok()
                            .flatten();
                        match spec {
                            Some(spec) => self.probes(c, spec.env, spec.working_dir),
                            None => ContainerProbes::default(),
                        }
                    }
                    None => ContainerProbes::default(),
                };
                Run::Running {
                    record,
                    _watcher: self.watch_exit(name, n, watch),
                    probes: Box::new(probes),
                }
            }
            FoundRun::Exited(exit) => Run::Exited {
                exit,
                at: Instant::now(),
            },
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
            host: self.ctx.node_ip,
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
        let process = match env::resolve(&self.ctx.client, pod, &container).await {
            Ok(process) => process,
            Err(e) => {
                self.slot_mut(which, i).blocked =
                    Some(("CreateContainerConfigError".to_owned(), e.0));
                return;
            }
        };
        let slot = self.slot_mut(which, i);
        slot.blocked = None;
        let (n, restarting) = match &slot.latest {
            None => (0, false),
            Some((n, _)) => (n + 1, true),
        };
        let working_dir = container
            .working_dir
            .as_ref()
            .map_or_else(|| self.dir.join("work"), PathBuf::from);
        let _ = std::fs::create_dir_all(&working_dir);
        let paths = RunPaths::new(&self.dir, &container.name, n);
        let spec = RunSpec {
            argv: process.argv,
            env: process.env,
            working_dir: working_dir.clone(),
            log: paths.log.clone(),
            run_record: paths.run_record.clone(),
            exit_record: paths.exit_record.clone(),
        };
        let launched = launch(&self.ctx.shim, &self.dir, &paths, &spec).await;
        if restarting {
            self.backoff.restarted(&container.name);
        }
        let run = match launched {
            Ok(Launched::Running(record, watch)) => {
                tracing::debug!(pod = %self.label, container = %container.name, n, pid = record.container_pid, "container started");
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

    /// Deletion: stops the processes within the grace period (preStop hooks, SIGTERM,
    /// SIGKILL), reports the final status, and removes the pod from the API.
    async fn terminate_and_delete(&mut self, pod: &Arc<Pod>) {
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
    async fn stop_all(&mut self, grace: Duration, pod: Option<&Arc<Pod>>) {
        let running: Vec<(String, crate::process::ProcessId)> = self
            .init
            .iter()
            .chain(self.main.iter())
            .filter_map(|s| Some((s.name.clone(), s.running_process()?)))
            .collect();
        if running.is_empty() {
            return;
        }
        let deadline = Instant::now() + grace;
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
                Some(super::hooks::run_pre_stop(
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
                    for process in still {
                        let _ = process.signal_group(rustix::process::Signal::KILL);
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

/// How long containers get between SIGTERM and SIGKILL: the deletion's grace period if the
/// pod is being deleted, else the spec's; at least [`MIN_GRACE`].
fn grace_period(pod: &Pod, deleting: bool) -> Duration {
    let deletion = deleting
        .then_some(pod.metadata.deletion_grace_period_seconds)
        .flatten();
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds);
    let seconds = deletion.or(spec).unwrap_or(30);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0)).max(MIN_GRACE)
}
