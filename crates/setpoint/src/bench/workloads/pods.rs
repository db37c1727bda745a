//! Watching pods the way a user would see them come up: one SDK watcher over a namespace,
//! recording for every pod when it was first seen, when it was first seen bound to a node, and
//! when it was first seen `Running` with `Ready=True` — all as local instants, so that per-pod
//! start latency is "created → observed running and ready", as Kubernetes' pod start-up SLO
//! measures it (there is no image pull here to exclude).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use futures::StreamExt;
use setpoint_runtime::k8s_openapi::api::core::v1::Pod;
use setpoint_runtime::{watcher, Client, WatcherConfig, WatcherEvent};
use tokio::task::JoinHandle;

/// What is known of one pod.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    /// The `app` label (which workload it belongs to).
    pub(super) app: String,
    /// When it was first seen.
    pub(super) created: Instant,
    /// When it was first seen with a node.
    pub(super) bound: Option<Instant>,
    /// When it was first seen running and ready.
    pub(super) ready: Option<Instant>,
    /// Its first container's restart count, as last seen.
    pub(super) restarts: i32,
    /// Whether it is gone (deleted) or terminating.
    pub(super) gone: bool,
}

/// Pods of one namespace, by uid, kept current by a watcher task until dropped.
pub(super) struct PodTracker {
    seen: Arc<Mutex<HashMap<String, Seen>>>,
    task: JoinHandle<()>,
}

impl PodTracker {
    /// Starts watching the pods of `namespace`.
    pub(super) fn start(client: &Client, namespace: &str) -> PodTracker {
        let seen: Arc<Mutex<HashMap<String, Seen>>> = Arc::default();
        let api = client.namespaced_api::<Pod>(namespace);
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut events = std::pin::pin!(watcher(api, WatcherConfig::default()));
                while let Some(event) = events.next().await {
                    let now = Instant::now();
                    let mut seen = lock(&seen);
                    match event {
                        Ok(WatcherEvent::Listed { objects, .. }) => {
                            for pod in &objects {
                                observe(&mut seen, pod, now, false);
                            }
                        }
                        Ok(WatcherEvent::Applied(pod)) => observe(&mut seen, &pod, now, false),
                        Ok(WatcherEvent::Deleted(pod)) => observe(&mut seen, &pod, now, true),
                        Err(e) => eprintln!("pod watch: {e}"),
                    }
                }
            })
        };
        PodTracker { seen, task }
    }

    /// A copy of what is known of the pods of workload `app`.
    pub(super) fn of(&self, app: &str) -> Vec<Seen> {
        lock(&self.seen)
            .values()
            .filter(|s| s.app == app)
            .cloned()
            .collect()
    }

    /// Waits until `done` holds for the pods of `app` (checked every 20 ms), or fails after
    /// `timeout`, saying what `progress` reports.
    pub(super) async fn wait(
        &self,
        app: &str,
        timeout: Duration,
        what: &str,
        done: impl Fn(&[Seen]) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let pods = self.of(app);
            if done(&pods) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let live: Vec<&Seen> = pods.iter().filter(|p| !p.gone).collect();
                bail!(
                    "{app}: not {what} after {timeout:?}: {} pods live, {} bound, {} ready",
                    live.len(),
                    live.iter().filter(|p| p.bound.is_some()).count(),
                    live.iter().filter(|p| p.ready.is_some()).count()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for PodTracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The map, even if a panicking holder poisoned the lock (its data is still coherent: each
/// update is one entry).
fn lock(seen: &Mutex<HashMap<String, Seen>>) -> MutexGuard<'_, HashMap<String, Seen>> {
    seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Live pods (not deleted, not terminating) that are running and ready.
pub(super) fn ready_count(pods: &[Seen]) -> usize {
    pods.iter().filter(|p| !p.gone && p.ready.is_some()).count()
}

/// Records what `pod` shows at `now`.
fn observe(seen: &mut HashMap<String, Seen>, pod: &Pod, now: Instant, deleted: bool) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    let entry = seen.entry(uid).or_insert_with(|| Seen {
        app: pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .unwrap_or_default(),
        created: now,
        bound: None,
        ready: None,
        restarts: 0,
        gone: false,
    });
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some_and(|n| !n.is_empty());
    if bound && entry.bound.is_none() {
        entry.bound = Some(now);
    }
    let status = pod.status.as_ref();
    let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if running && ready && entry.ready.is_none() {
        entry.ready = Some(now);
    }
    entry.restarts = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map_or(0, |c| c.restart_count);
    entry.gone = deleted || pod.metadata.deletion_timestamp.is_some();
}
