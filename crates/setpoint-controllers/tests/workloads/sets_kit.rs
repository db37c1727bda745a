//! What the StatefulSet and DaemonSet tests share: a test kubelet, nodes, pod listing.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use setpoint_runtime::Client;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

pub(crate) const NS: &str = "default";

/// Pods with this image are never marked ready by the test kubelet.
pub(crate) const NEVER_READY: &str = "never-ready:1";

/// A task standing in for kubelets: marks each pod Running and Ready once seen for
/// `ready_after` (unless its image is [`NEVER_READY`], or `bound_only` and it has no node),
/// and finishes terminating pods at once (a delete with grace period 0). Aborted when dropped.
pub(crate) struct Kubelet(JoinHandle<()>);

impl Kubelet {
    pub(crate) fn start(client: &Client, ready_after: Duration, bound_only: bool) -> Kubelet {
        let api = client.namespaced_api::<Pod>(NS);
        Kubelet(tokio::spawn(async move {
            let mut first_seen: HashMap<String, Instant> = HashMap::new();
            loop {
                let pods = api.list(&ListParams::default()).await.map(|l| l.items);
                for pod in pods.unwrap_or_default() {
                    let name = pod.name_any();
                    let key = format!("{name}/{}", pod.uid().unwrap_or_default());
                    let seen = *first_seen.entry(key).or_insert_with(Instant::now);
                    if pod.metadata.deletion_timestamp.is_some() {
                        let params = DeleteParams {
                            grace_period_seconds: Some(0),
                            ..DeleteParams::default()
                        };
                        let _ = api.delete(&name, &params).await;
                        continue;
                    }
                    let bound = pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_ref())
                        .is_some();
                    if is_ready(&pod)
                        || image_of(&pod) == NEVER_READY
                        || (bound_only && !bound)
                        || seen.elapsed() < ready_after
                        || phase(&pod) == "Failed"
                    {
                        continue;
                    }
                    let _ = mark_ready(&api, &name).await;
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

/// Marks `pod` Running and Ready since now.
pub(crate) async fn mark_ready(api: &Api<Pod>, pod: &str) -> Result<Pod, kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = json!({"status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
        ],
    }});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

pub(crate) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(crate) fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

pub(crate) fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

pub(crate) fn label<'a>(pod: &'a Pod, key: &str) -> &'a str {
    pod.labels().get(key).map_or("", String::as_str)
}

/// The live (not terminating) pods labelled `app=<app>`, by name.
pub(crate) async fn live_pods(api: &Api<Pod>, app: &str) -> Vec<Pod> {
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    pods.sort_by_key(ResourceExt::name_any);
    pods
}

/// Creates node `name` with `labels` and `spec` merged in, Ready with room for 110 pods.
pub(crate) async fn add_node(client: &Client, name: &str, labels: Value, spec: Value) {
    let api = client.api::<Node>();
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec}))
            .expect("node");
    api.create(&PostParams::default(), &node)
        .await
        .expect("create node");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        }})),
    )
    .await
    .expect("node status");
}
