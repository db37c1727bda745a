//! The pods bound to this node, each driven by a worker task of its own (keyed by the pod's
//! uid): [`PodWorkers`] routes the informer's events to the workers, starts a worker for every
//! new pod, and after a restart one for every pod directory whose pod is gone from the API (to
//! stop what still runs of it and clean up).

mod backoff;
mod env;
mod hooks;
mod probing;
mod resources;
mod slot;
mod status;
mod worker;

pub(crate) use env::{expand, field_value};

use std::collections::HashMap;
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use setpoint_runtime::{Client, Deleted, EventHandler, ObjectCache};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What every pod worker needs.
#[derive(Debug)]
pub(crate) struct PodContext {
    /// The API.
    pub(crate) client: Client,
    /// Where pod directories live (`ROOT/pods/…`).
    pub(crate) root_dir: PathBuf,
    /// The node's IP: every pod's host and pod IP.
    pub(crate) node_ip: IpAddr,
    /// How to start a shim.
    pub(crate) shim: Vec<OsString>,
    /// Where containers' cgroups go; `None`: containers are tracked without cgroups.
    pub(crate) cgroups: Option<crate::process::CgroupParent>,
    /// Where containers' limit cgroups go; `None`: limits are not enforced.
    pub(crate) limits: Option<crate::process::limits::LimitParent>,
    /// The resource sampler, told of every container started (to sample it at once).
    pub(crate) metrics: Arc<crate::metrics::Sampler>,
    /// What the pods' volumes need.
    pub(crate) volumes: crate::volumes::VolumeContext,
    /// The pods' events (`FailedMount`, …).
    pub(crate) events: setpoint_runtime::EventRecorder,
    /// The node's pod network (bridge mode); none: pods share the host's network.
    pub(crate) network: Option<Arc<crate::network::NodeNetwork>>,
}

/// The latest word on a pod, as its worker sees it.
#[derive(Debug, Clone)]
pub(crate) enum PodUpdate {
    /// The pod as the API shows it.
    Present(Arc<Pod>),
    /// The pod is gone from the API.
    Removed,
}

/// The running pod workers.
#[derive(Clone)]
pub(crate) struct PodWorkers {
    ctx: Arc<PodContext>,
    /// Per pod uid, the channel to its worker. A uid is here from the worker's start until it
    /// is done with the pod.
    workers: Arc<Mutex<HashMap<String, watch::Sender<PodUpdate>>>>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
}

impl PodWorkers {
    /// No workers yet; they stop (leaving processes running) when `shutdown` is cancelled.
    pub(crate) fn new(ctx: PodContext, shutdown: CancellationToken) -> PodWorkers {
        PodWorkers {
            ctx: Arc::new(ctx),
            workers: Arc::default(),
            tasks: TaskTracker::new(),
            shutdown,
        }
    }

    /// Hands the pod to its worker, starting one if needed.
    pub(crate) fn update(&self, pod: &Arc<Pod>) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let mut workers = self.workers.lock();
        if let Some(tx) = workers.get(&uid) {
            tx.send_replace(PodUpdate::Present(pod.clone()));
            return;
        }
        let dir = crate::logs::pod_dir(
            &self.ctx.root_dir,
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
            &uid,
        );
        let (tx, rx) = watch::channel(PodUpdate::Present(pod.clone()));
        workers.insert(uid.clone(), tx);
        self.spawn(uid, dir, rx);
    }

    /// Tells the pod's worker the pod is gone from the API.
    pub(crate) fn remove(&self, uid: &str) {
        if let Some(tx) = self.workers.lock().get(uid) {
            tx.send_replace(PodUpdate::Removed);
        }
    }

    /// Starts workers for pod directories under the root whose pods are neither in `pods` nor
    /// handled by a worker: pods deleted while no agent ran.
    pub(crate) fn collect_orphans(&self, pods: &ObjectCache<Pod>) {
        let known: std::collections::HashSet<String> = pods
            .list()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let Ok(dirs) = std::fs::read_dir(self.ctx.root_dir.join("pods")) else {
            return;
        };
        for entry in dirs.flatten() {
            let dir = entry.path();
            let Some(uid) = pod_uid(&dir) else {
                continue;
            };
            let mut workers = self.workers.lock();
            if known.contains(&uid) || workers.contains_key(&uid) {
                continue;
            }
            tracing::info!(dir = %dir.display(), "stopping what is left of a pod deleted while the agent was away");
            let (tx, rx) = watch::channel(PodUpdate::Removed);
            workers.insert(uid.clone(), tx);
            drop(workers);
            self.spawn(uid, dir, rx);
        }
    }

    fn spawn(&self, uid: String, dir: PathBuf, rx: watch::Receiver<PodUpdate>) {
        let ctx = self.ctx.clone();
        let workers = self.workers.clone();
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(async move {
            let done = worker::pod_worker(ctx, uid.clone(), dir, rx, shutdown).await;
            if done {
                workers.lock().remove(&uid);
            }
        });
    }

    /// How many pods have workers.
    pub(crate) fn len(&self) -> usize {
        self.workers.lock().len()
    }

    /// Waits for every worker to stop (after `shutdown`).
    pub(crate) async fn wait(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        self.workers.lock().clear();
    }
}

/// The uid of the pod a directory belongs to: its `pod.json`, else the last `_`-separated
/// part of its name (`<namespace>_<name>_<uid>`).
fn pod_uid(dir: &Path) -> Option<String> {
    if let Ok(Some(identity)) =
        crate::process::read_json::<serde_json::Value>(&dir.join("pod.json"))
    {
        if let Some(uid) = identity["uid"].as_str() {
            return Some(uid.to_owned());
        }
    }
    let name = dir.file_name()?.to_str()?;
    Some(name.rsplit_once('_')?.1.to_owned())
}

/// The informer handler that feeds the workers.
pub(crate) struct PodEvents(pub(crate) PodWorkers);

impl EventHandler<Pod> for PodEvents {
    fn on_add(&self, pod: &Arc<Pod>, _in_initial_list: bool) {
        self.0.update(pod);
    }

    fn on_update(&self, _old: &Arc<Pod>, new: &Arc<Pod>) {
        self.0.update(new);
    }

    fn on_delete(&self, deleted: &Deleted<Pod>) {
        if let Some(uid) = deleted.object().metadata.uid.as_deref() {
            self.0.remove(uid);
        }
    }
}
