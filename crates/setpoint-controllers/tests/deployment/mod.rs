//! The Deployment loop (with the ReplicaSet loop) against a real in-process API server, with a
//! test-side "kubelet" that marks new pods Running and Ready (after a delay, so rollouts take
//! several steps) unless their image is [`NEVER_READY`]: creating a Deployment, rolling updates
//! watched event by event for the surge and availability bounds, Recreate watched for old and
//! new pods at once, pause and resume, revision annotations and history cleanup, undo,
//! the progress deadline, and proportional scaling in the middle of a rollout.
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

use crate::common;

mod history;
mod ownership;
mod strategies;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::run_loops;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;
use setpoint_runtime::Client;
use setpoint_testenv::eventually;
use setpoint_testenv::TestEnv;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

const NS: &str = "default";
/// Pods with this image are never marked ready by the test kubelet.
const NEVER_READY: &str = "never-ready:1";
const REVISION: &str = "deployment.kubernetes.io/revision";

/// A task standing in for kubelets: marks each pod Running and Ready once it has been seen
/// for `ready_after`, unless its image is [`NEVER_READY`]; with `Nodes::Bound`, also finishes
/// each terminating pod after `stop_after` (a delete with grace period 0, as a kubelet does
/// once the containers stop).
/// Aborted when dropped.
struct Kubelet(JoinHandle<()>);

/// Whether the pods the test kubelet sees are on a node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Nodes {
    /// Pods stay unscheduled: their deletion is immediate.
    None,
    /// Pods name a node in their template: their deletion is graceful and waits for the
    /// kubelet to finish them.
    Bound { stop_after: Duration },
}

impl Kubelet {
    fn start(client: &Client, ready_after: Duration) -> Kubelet {
        Kubelet::start_with(client, ready_after, Nodes::None)
    }

    fn start_with(client: &Client, ready_after: Duration, nodes: Nodes) -> Kubelet {
        let api = client.namespaced_api::<Pod>(NS);
        Kubelet(tokio::spawn(async move {
            let mut first_seen: HashMap<String, Instant> = HashMap::new();
            let mut terminating_since: HashMap<String, Instant> = HashMap::new();
            loop {
                let pods = api.list(&ListParams::default()).await.map(|l| l.items);
                for pod in pods.unwrap_or_default() {
                    let name = pod.name_any();
                    let seen = *first_seen.entry(name.clone()).or_insert_with(Instant::now);
                    if let Nodes::Bound { stop_after } = nodes {
                        if pod.metadata.deletion_timestamp.is_some() {
                            let since = *terminating_since
                                .entry(name.clone())
                                .or_insert_with(Instant::now);
                            if since.elapsed() >= stop_after {
                                let params = DeleteParams {
                                    grace_period_seconds: Some(0),
                                    ..DeleteParams::default()
                                };
                                let _ = api.delete(&name, &params).await;
                            }
                            continue;
                        }
                    }
                    if is_ready(&pod)
                        || pod.metadata.deletion_timestamp.is_some()
                        || image_of(&pod) == NEVER_READY
                        || seen.elapsed() < ready_after
                    {
                        continue;
                    }
                    let now = k8s_openapi::jiff::Timestamp::now().to_string();
                    let patch = json!({"status": {
                        "phase": "Running",
                        "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": now},
                            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                        ],
                    }});
                    // The pod may be gone already; the next round sees.
                    let _ = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                }
                sleep(Duration::from_millis(20)).await;
            }
        }))
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// A Deployment of `replicas` pods of `image`, labelled `app=<name>`, with `strategy`.
fn deployment(name: &str, replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    }))
    .expect("a valid deployment")
}

fn rolling(surge: serde_json::Value, unavailable: serde_json::Value) -> serde_json::Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

/// Waits until `kubectl rollout status` would say the Deployment is rolled out (the rules of
/// kubectl's `DeploymentStatusViewer`); returns it.
async fn rolled_out(api: &Api<Deployment>, name: &str) -> Deployment {
    eventually(&format!("{name} is rolled out"), || async {
        let d = api.get(name).await.expect("get deployment");
        let s = d.status.clone().unwrap_or_default();
        let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let done = s.observed_generation >= d.metadata.generation
            && s.updated_replicas.unwrap_or(0) >= replicas
            && s.replicas.unwrap_or(0) <= s.updated_replicas.unwrap_or(0)
            && s.available_replicas.unwrap_or(0) >= s.updated_replicas.unwrap_or(0);
        done.then_some(d)
    })
    .await
}

fn condition(d: &Deployment, type_: &str) -> Option<(String, Option<String>)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

async fn replicasets(api: &Api<ReplicaSet>, app: &str) -> Vec<ReplicaSet> {
    let mut rses = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list replica sets")
        .items;
    rses.sort_by_key(revision);
    rses
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

async fn set_image(api: &Api<Deployment>, name: &str, image: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}})),
    )
    .await
    .expect("set image");
}

/// Watches the pods of the namespace from a list onwards and runs `check` on the set of live
/// (not terminating) pods after every event, recording what it reports.
struct PodObserver {
    task: JoinHandle<()>,
    violations: Arc<Mutex<Vec<String>>>,
    events: Arc<Mutex<usize>>,
}

impl PodObserver {
    /// Checks the live pods.
    async fn start(
        client: &Client,
        check: impl Fn(&BTreeMap<String, Pod>) -> Option<String> + Send + 'static,
    ) -> PodObserver {
        PodObserver::start_with(client, Terminating::Excluded, check).await
    }

    /// Checks the pods, terminating ones included or not.
    async fn start_with(
        client: &Client,
        terminating: Terminating,
        check: impl Fn(&BTreeMap<String, Pod>) -> Option<String> + Send + 'static,
    ) -> PodObserver {
        let check = move |pods: &BTreeMap<String, Pod>| match terminating {
            Terminating::Excluded => check(&live(pods)),
            Terminating::Included => check(pods),
        };
        let api = client.namespaced_api::<Pod>(NS);
        let list = api.list(&ListParams::default()).await.expect("list pods");
        let version = list.metadata.resource_version.clone().unwrap_or_default();
        let mut pods: BTreeMap<String, Pod> =
            list.items.into_iter().map(|p| (p.name_any(), p)).collect();
        let violations = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::new(Mutex::new(0));
        if let Some(v) = check(&pods) {
            violations.lock().push(v);
        }
        let stream = api
            .watch(&WatchParams::default(), &version)
            .await
            .expect("watch pods");
        let (v, e) = (violations.clone(), events.clone());
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event.expect("watch event") {
                    WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                        pods.insert(p.name_any(), p);
                    }
                    WatchEvent::Deleted(p) => {
                        pods.remove(&p.name_any());
                    }
                    WatchEvent::Bookmark(_) => continue,
                    WatchEvent::Error(e) => panic!("watch error: {e:?}"),
                }
                *e.lock() += 1;
                if let Some(violation) = check(&pods) {
                    v.lock().push(violation);
                }
            }
        });
        PodObserver {
            task,
            violations,
            events,
        }
    }

    /// Stops watching; the violations seen and the number of events.
    fn finish(self) -> (Vec<String>, usize) {
        self.task.abort();
        let violations = self.violations.lock().clone();
        let events = *self.events.lock();
        (violations, events)
    }
}

/// Whether an observer counts terminating pods.
#[derive(Clone, Copy)]
enum Terminating {
    Excluded,
    Included,
}

fn live(pods: &BTreeMap<String, Pod>) -> BTreeMap<String, Pod> {
    pods.iter()
        .filter(|(_, p)| p.metadata.deletion_timestamp.is_none())
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect()
}
