//! The Deployment loop (with the ReplicaSet loop) against a real in-process API server, with a
//! test-side "kubelet" that marks new pods Running and Ready (after a delay, so rollouts take
//! several steps) unless their image is [`NEVER_READY`]: creating a Deployment, rolling updates
//! watched event by event for the surge and availability bounds, Recreate watched for old and
//! new pods at once, pause and resume, revision annotations and history cleanup, undo,
//! the progress deadline, and proportional scaling in the middle of a rollout.
//!
//! Real time: tests poll with generous deadlines and never assert on how long something took.

mod common;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_should_get_a_replicaset_pods_and_a_true_status() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let mut d = deployment("web", 3, "nginx:1", json!({"type": "RollingUpdate"}));
    d.metadata.annotations =
        Some([("kubernetes.io/change-cause".to_owned(), "first".to_owned())].into());
    let created = api
        .create(&PostParams::default(), &d)
        .await
        .expect("create");

    let done = rolled_out(&api, "web").await;
    let s = done.status.clone().expect("status");
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas,
            s.unavailable_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3), Some(0))
    );
    assert_eq!(
        condition(&done, "Available"),
        Some(("True".into(), Some("MinimumReplicasAvailable".into())))
    );
    let done = eventually("Progressing says NewReplicaSetAvailable", || async {
        let d = api.get("web").await.expect("get");
        (condition(&d, "Progressing")
            == Some(("True".into(), Some("NewReplicaSetAvailable".into()))))
        .then_some(d)
    })
    .await;
    assert_eq!(
        done.annotations().get(REVISION).map(String::as_str),
        Some("1")
    );

    let rses = replicasets(&client.namespaced_api::<ReplicaSet>(NS), "web").await;
    assert_eq!(rses.len(), 1);
    let rs = &rses[0];
    let hash = rs
        .labels()
        .get("pod-template-hash")
        .cloned()
        .expect("hash label");
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(
        rs.spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.as_ref())
            .and_then(|l| l.get("pod-template-hash")),
        Some(&hash)
    );
    let owner = &rs.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        (
            "Deployment",
            created.uid().expect("uid").as_str(),
            Some(true)
        )
    );
    let annotations = rs.annotations();
    assert_eq!(annotations.get(REVISION).map(String::as_str), Some("1"));
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/max-replicas")
            .map(String::as_str),
        Some("4"),
        "3 + 25% rounded up"
    );
    assert_eq!(
        annotations
            .get("kubernetes.io/change-cause")
            .map(String::as_str),
        Some("first")
    );
    let pods = client
        .namespaced_api::<Pod>(NS)
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("pods")
        .items;
    assert_eq!(pods.len(), 3);
    assert!(pods
        .iter()
        .all(|p| p.labels().get("pod-template-hash") == Some(&hash)));
    let events_api = client.namespaced_api::<k8s_openapi::api::events::v1::Event>(NS);
    let note = format!("Scaled up replica set web-{hash} from 0 to 3");
    eventually("a ScalingReplicaSet event", || async {
        let events = events_api
            .list(&ListParams::default())
            .await
            .expect("events")
            .items;
        events
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("ScalingReplicaSet")
                    && e.note.as_deref() == Some(note.as_str())
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Deployment")
            })
            .then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_should_adopt_a_matching_orphan_and_release_one_relabelled_away() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let d = deployment("web", 2, "nginx:1", json!({"type": "RollingUpdate"}));
    // An orphan with the Deployment's template (and a hash label of its own), made first.
    let spec = d.spec.clone().expect("spec");
    let mut template = spec.template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.insert("pod-template-hash".into(), "orphan".into());
    }
    let orphan: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web-orphan", "labels": {"app": "web", "pod-template-hash": "orphan"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web", "pod-template-hash": "orphan"}},
            "template": template,
        },
    }))
    .expect("a valid replica set");
    rs_api
        .create(&PostParams::default(), &orphan)
        .await
        .expect("create orphan");
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let created = api
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    rolled_out(&api, "web").await;
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(
        rses.len(),
        1,
        "the orphan is the new replica set: {rses:#?}"
    );
    assert_eq!(rses[0].name_any(), "web-orphan");
    assert_eq!(
        rses[0].owner_references().first().map(|r| r.uid.clone()),
        created.uid()
    );

    // Relabelled out of the selector, it is released (and a new one made in its place).
    rs_api
        .patch(
            "web-orphan",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "elsewhere"}}})),
        )
        .await
        .expect("relabel");
    eventually("the relabelled replica set is released", || async {
        let rs = rs_api.get("web-orphan").await.expect("get");
        rs.owner_references().is_empty().then_some(())
    })
    .await;
    eventually("a new replica set replaces it", || async {
        let rses = replicasets(&rs_api, "web").await;
        (rses.len() == 1 && rses[0].name_any() != "web-orphan").then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_should_stay_within_surge_and_unavailability_at_every_moment() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(300));
    let api = client.namespaced_api::<Deployment>(NS);
    let (replicas, surge, unavailable) = (4_usize, 1_usize, 1_usize);
    api.create(
        &PostParams::default(),
        &deployment("web", 4, "nginx:1", rolling(json!(1), json!(1))),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    let saw_both = Arc::new(Mutex::new(false));
    let both = saw_both.clone();
    let observer = PodObserver::start(&client, move |pods| {
        let images: Vec<String> = pods.values().map(image_of).collect();
        if images.iter().any(|i| i == "nginx:1") && images.iter().any(|i| i == "nginx:2") {
            *both.lock() = true;
        }
        let ready = pods.values().filter(|p| is_ready(p)).count();
        if pods.len() > replicas + surge {
            Some(format!(
                "{} pods, more than {replicas} + {surge}: {:?}",
                pods.len(),
                pods.keys()
            ))
        } else if ready < replicas - unavailable {
            Some(format!(
                "{ready} ready pods, fewer than {replicas} - {unavailable}"
            ))
        } else {
            None
        }
    })
    .await;
    set_image(&api, "web", "nginx:2").await;
    let done = rolled_out(&api, "web").await;
    let (violations, events) = observer.finish();
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(events >= 8, "the rollout was watched ({events} events)");
    assert!(
        *saw_both.lock(),
        "old and new pods ran side by side during the rolling update"
    );
    assert_eq!(
        done.status.as_ref().and_then(|s| s.updated_replicas),
        Some(4)
    );
    let rses = replicasets(&client.namespaced_api::<ReplicaSet>(NS), "web").await;
    assert_eq!(rses.iter().map(spec_replicas).collect::<Vec<_>>(), [0, 4]);
    assert_eq!(rses.iter().map(revision).collect::<Vec<_>>(), [1, 2]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_should_never_run_old_and_new_pods_at_once() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::from_millis(100));
    let api = client.namespaced_api::<Deployment>(NS);
    api.create(
        &PostParams::default(),
        &deployment("web", 3, "nginx:1", json!({"type": "Recreate"})),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    let observer = PodObserver::start(&client, |pods| {
        let hashes: std::collections::BTreeSet<_> = pods
            .values()
            .filter_map(|p| p.labels().get("pod-template-hash").cloned())
            .collect();
        (hashes.len() > 1).then(|| format!("pods of several templates at once: {hashes:?}"))
    })
    .await;
    set_image(&api, "web", "nginx:2").await;
    let done = rolled_out(&api, "web").await;
    let (violations, events) = observer.finish();
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(events >= 6, "the rollout was watched ({events} events)");
    assert_eq!(
        done.status.as_ref().and_then(|s| s.available_replicas),
        Some(3)
    );
    let pods = client
        .namespaced_api::<Pod>(NS)
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items;
    assert!(pods.iter().all(|p| image_of(p) == "nginx:2"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_should_wait_until_terminating_old_pods_are_gone() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let nodes = Nodes::Bound {
        stop_after: Duration::from_millis(500),
    };
    let _kubelet = Kubelet::start_with(&client, Duration::ZERO, nodes);
    let api = client.namespaced_api::<Deployment>(NS);
    // Pods made on a node: deleting them is graceful, they stay until the kubelet is done.
    let mut d = deployment("web", 2, "nginx:1", json!({"type": "Recreate"}));
    if let Some(spec) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        spec.node_name = Some("node-a".into());
    }
    api.create(&PostParams::default(), &d)
        .await
        .expect("create");
    rolled_out(&api, "web").await;

    let saw_terminating = Arc::new(Mutex::new(false));
    let terminating = saw_terminating.clone();
    let observer = PodObserver::start_with(&client, Terminating::Included, move |pods| {
        if pods
            .values()
            .any(|p| p.metadata.deletion_timestamp.is_some())
        {
            *terminating.lock() = true;
        }
        let hashes: std::collections::BTreeSet<_> = pods
            .values()
            .filter_map(|p| p.labels().get("pod-template-hash").cloned())
            .collect();
        (hashes.len() > 1)
            .then(|| format!("pods of several templates, terminating ones included: {hashes:?}"))
    })
    .await;
    set_image(&api, "web", "nginx:2").await;
    rolled_out(&api, "web").await;
    let (violations, _) = observer.finish();
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(*saw_terminating.lock(), "old pods terminated gracefully");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_should_stop_the_rollout_and_resume_continue_it() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    api.create(
        &PostParams::default(),
        &deployment("web", 2, "nginx:1", json!({"type": "RollingUpdate"})),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": true}})),
    )
    .await
    .expect("pause");
    set_image(&api, "web", "nginx:2").await;
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale while paused");
    let paused = eventually("the paused spec is observed", || async {
        let d = api.get("web").await.expect("get");
        let observed =
            d.status.as_ref().and_then(|s| s.observed_generation) >= d.metadata.generation;
        (observed
            && condition(&d, "Progressing")
                .is_some_and(|c| c.1.as_deref() == Some("DeploymentPaused")))
        .then_some(d)
    })
    .await;
    assert_eq!(
        condition(&paused, "Progressing").map(|c| c.0),
        Some("Unknown".into())
    );
    eventually(
        "the old replica set is scaled to 3 while paused",
        || async {
            let rses = replicasets(&rs_api, "web").await;
            (rses.len() == 1 && spec_replicas(&rses[0]) == 3).then_some(())
        },
    )
    .await;
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(rses.len(), 1, "no rollout while paused");

    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": false}})),
    )
    .await
    .expect("resume");
    let done = rolled_out(&api, "web").await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.updated_replicas),
        Some(3)
    );
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(rses.len(), 2);
    assert_eq!(rses.iter().map(spec_replicas).collect::<Vec<_>>(), [0, 3]);
    eventually("Progressing leaves DeploymentPaused", || async {
        let d = api.get("web").await.expect("get");
        (condition(&d, "Progressing")
            == Some(("True".into(), Some("NewReplicaSetAvailable".into()))))
        .then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_undo_and_history_limit_should_work_as_in_kubernetes() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    let mut d = deployment("web", 2, "nginx:1", json!({"type": "RollingUpdate"}));
    d.spec.as_mut().expect("spec").revision_history_limit = Some(2);
    api.create(&PostParams::default(), &d)
        .await
        .expect("create");
    rolled_out(&api, "web").await;
    let first = replicasets(&rs_api, "web").await.remove(0);

    for (i, image) in ["nginx:2", "nginx:3"].into_iter().enumerate() {
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"kubernetes.io/change-cause": format!("image {image}")}}})),
        )
        .await
        .expect("annotate");
        set_image(&api, "web", image).await;
        let done = rolled_out(&api, "web").await;
        assert_eq!(done.annotations().get(REVISION), Some(&(i + 2).to_string()));
    }
    let rses = replicasets(&rs_api, "web").await;
    assert_eq!(rses.iter().map(revision).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        rses[2]
            .annotations()
            .get("kubernetes.io/change-cause")
            .map(String::as_str),
        Some("image nginx:3")
    );

    // Undo to revision 1 (what kubectl does: put that ReplicaSet's template back).
    let mut template = first
        .spec
        .clone()
        .and_then(|s| s.template)
        .expect("template");
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove("pod-template-hash");
    }
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": template}})),
    )
    .await
    .expect("undo");
    let done = rolled_out(&api, "web").await;
    assert_eq!(
        done.annotations().get(REVISION).map(String::as_str),
        Some("4")
    );
    let reused = rs_api
        .get(&first.name_any())
        .await
        .expect("the first replica set is reused");
    assert_eq!(reused.uid(), first.uid());
    assert_eq!(spec_replicas(&reused), 2);
    assert_eq!(
        reused.annotations().get(REVISION).map(String::as_str),
        Some("4")
    );
    assert_eq!(
        reused
            .annotations()
            .get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("1")
    );

    // Another rollout makes three old replica sets; the limit keeps two.
    set_image(&api, "web", "nginx:5").await;
    rolled_out(&api, "web").await;
    let rses = eventually("history is cut to 2 old replica sets", || async {
        let rses = replicasets(&rs_api, "web").await;
        (rses.len() == 3).then_some(rses)
    })
    .await;
    assert_eq!(
        rses.iter().map(revision).collect::<Vec<_>>(),
        [3, 4, 5],
        "the lowest revision went"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_should_exceed_its_progress_deadline() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let mut d = deployment("web", 2, NEVER_READY, json!({"type": "RollingUpdate"}));
    d.spec.as_mut().expect("spec").progress_deadline_seconds = Some(2);
    api.create(&PostParams::default(), &d)
        .await
        .expect("create");
    let stuck = eventually("Progressing is ProgressDeadlineExceeded", || async {
        let d = api.get("web").await.expect("get");
        (condition(&d, "Progressing")
            == Some(("False".into(), Some("ProgressDeadlineExceeded".into()))))
        .then_some(d)
    })
    .await;
    assert_eq!(
        condition(&stuck, "Available").map(|c| c.0),
        Some("False".into())
    );
    let message = stuck
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "Progressing")
                .and_then(|c| c.message.clone())
        });
    assert!(message.is_some_and(|m| m.contains("has timed out progressing")));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_mid_rollout_should_be_proportional() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let running = run_loops(&client, "deployment,replicaset");
    let _kubelet = Kubelet::start(&client, Duration::ZERO);
    let api = client.namespaced_api::<Deployment>(NS);
    let rs_api = client.namespaced_api::<ReplicaSet>(NS);
    api.create(
        &PostParams::default(),
        &deployment("web", 10, "nginx:1", rolling(json!(3), json!(2))),
    )
    .await
    .expect("create");
    rolled_out(&api, "web").await;

    // A rollout that cannot finish: 13 pods at most, 8 available at least.
    set_image(&api, "web", NEVER_READY).await;
    let sizes = |rses: &[ReplicaSet]| rses.iter().map(spec_replicas).collect::<Vec<_>>();
    eventually("the stuck rollout settles at old 8, new 5", || async {
        let rses = replicasets(&rs_api, "web").await;
        (sizes(&rses) == [8, 5]).then_some(())
    })
    .await;
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 20}})),
    )
    .await
    .expect("scale");
    // 23 (20 + surge 3) shared in proportion to 8:5 of 13: 14 and 9.
    eventually("the new size is shared proportionally", || async {
        let rses = replicasets(&rs_api, "web").await;
        (sizes(&rses) == [14, 9]).then_some(())
    })
    .await;
    let rses = replicasets(&rs_api, "web").await;
    for rs in &rses {
        assert_eq!(
            rs.annotations()
                .get("deployment.kubernetes.io/desired-replicas")
                .map(String::as_str),
            Some("20")
        );
        assert_eq!(
            rs.annotations()
                .get("deployment.kubernetes.io/max-replicas")
                .map(String::as_str),
            Some("23")
        );
    }
    running.stop().await;
}
