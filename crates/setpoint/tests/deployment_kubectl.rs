//! The Deployment loop driven by the real `kubectl` against `setpoint server` (every loop but
//! the scheduler, no node agent; a background thread stands in for kubelets and marks each
//! new pod Running and Ready through the status subresource): `kubectl apply`, `rollout
//! status`, `set image`, `rollout history` with change causes, `rollout undo`, `pause` /
//! `resume`, `restart`, `scale`, `delete`, the READY / UP-TO-DATE / AVAILABLE columns, and
//! `rollout status` failing past the progress deadline.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::Server;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::ResourceExt;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {kubernetes.io/change-cause: "first release"}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: "nginx:1.25"}
"#;

/// Pods of this image are never marked ready.
const NEVER_READY: &str = "never-ready:1";

/// Marks every pod that is not ready Running and Ready (but those of [`NEVER_READY`]), until
/// dropped.
struct Kubelet {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Kubelet {
    fn start(server: &Server) -> Kubelet {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let client = runtime.block_on(server.kube_client());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let pods = kube::Api::<Pod>::namespaced(client, "default");
            while !stopping.load(Ordering::Relaxed) {
                runtime.block_on(mark_ready(&pods));
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Kubelet {
            stop,
            thread: Some(thread),
        }
    }
}

async fn mark_ready(pods: &kube::Api<Pod>) {
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return;
    };
    for pod in list.items {
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.as_deref());
        if ready || pod.metadata.deletion_timestamp.is_some() || image == Some(NEVER_READY) {
            continue;
        }
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let patch = serde_json::json!({"status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            ],
        }});
        // The pod may be gone already; the next round sees.
        let _ = pods
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await;
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start() -> (Server, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let server = Server::start_with(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--no-agent", "--controllers=*,-scheduler"],
    );
    (server, tmp)
}

fn rollout_status(s: &Server) {
    let out = s.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
}

/// Polls `kubectl args` until its output (trimmed) is `want`.
fn wait_output(s: &Server, args: &[&str], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = s.ok(args);
        if out.trim() == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?} stayed {out:?}, wanted {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The row of `kubectl get deploy web`, whitespace-split, without the age.
fn get_row(s: &Server) -> Vec<String> {
    let table = s.ok(&["get", "deploy", "web"]);
    let mut lines = table.lines();
    let header: Vec<_> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{table}"
    );
    let row: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    row[..4].to_vec()
}

fn wait_row(s: &Server, want: [&str; 4]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = get_row(s);
        if row == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl get deploy shows {row:?}, wanted {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The images of the pods of web, sorted (pods without a node are deleted at once, so
/// every pod listed is live).
fn pod_images(s: &Server) -> Vec<String> {
    let out = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].spec.containers[0].image}",
    ]);
    let mut images: Vec<String> = out.split_whitespace().map(str::to_owned).collect();
    images.sort();
    images
}

/// Waits until the pods of web are `n` pods of `image`.
fn wait_pods(s: &Server, n: usize, image: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let images = pod_images(s);
        if images.len() == n && images.iter().all(|i| i == image) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pods of web are {images:?}, wanted {n} of {image}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn replicaset_count(s: &Server) -> usize {
    s.ok(&["get", "rs", "-l", "app=web", "-o", "name"])
        .lines()
        .count()
}

#[test]
fn kubectl_should_roll_out_undo_pause_restart_and_scale_a_deployment() {
    let (s, _tmp) = start();
    let _kubelet = Kubelet::start(&s);
    let out = s.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    rollout_status(&s);
    wait_row(&s, ["web", "3/3", "3", "3"]);
    assert_eq!(pod_images(&s), ["nginx:1.25"; 3]);

    // set image → a rolling update to revision 2, annotated with its cause (after the
    // change, as with Kubernetes: the annotation goes to the ReplicaSet that is new then).
    s.ok(&["set", "image", "deployment/web", "c=nginx:1.26"]);
    s.ok(&[
        "annotate",
        "deployment/web",
        "kubernetes.io/change-cause=image 1.26",
        "--overwrite",
    ]);
    rollout_status(&s);
    wait_pods(&s, 3, "nginx:1.26");
    let history = s.ok(&["rollout", "history", "deployment/web"]);
    let lines: Vec<&str> = history
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with('1') && l.contains("first release")),
        "{history}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with('2') && l.contains("image 1.26")),
        "{history}"
    );
    let detail = s.ok(&["rollout", "history", "deployment/web", "--revision=2"]);
    assert!(detail.contains("nginx:1.26"), "{detail}");

    // undo → back to the first template, as revision 3, on the first ReplicaSet.
    s.ok(&["rollout", "undo", "deployment/web"]);
    rollout_status(&s);
    wait_output(
        &s,
        &[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}",
        ],
        "3",
    );
    assert_eq!(
        s.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}"
        ])
        .trim(),
        "nginx:1.25"
    );
    assert_eq!(replicaset_count(&s), 2, "the old ReplicaSet was reused");
    wait_pods(&s, 3, "nginx:1.25");
    let history = s.ok(&["rollout", "history", "deployment/web"]);
    let revisions: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["2", "3"], "{history}");

    // pause: a template change waits; resume: it rolls out.
    s.ok(&["rollout", "pause", "deployment/web"]);
    s.ok(&["set", "image", "deployment/web", "c=nginx:1.27"]);
    wait_output(
        &s,
        &[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Progressing\")].reason}",
        ],
        "DeploymentPaused",
    );
    let generation = s.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    wait_output(
        &s,
        &[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.observedGeneration}",
        ],
        generation.trim(),
    );
    assert_eq!(replicaset_count(&s), 2, "no new ReplicaSet while paused");
    assert_eq!(pod_images(&s), ["nginx:1.25"; 3]);
    s.ok(&["rollout", "resume", "deployment/web"]);
    rollout_status(&s);
    wait_pods(&s, 3, "nginx:1.27");

    // restart: a new ReplicaSet with the restartedAt template annotation.
    s.ok(&["rollout", "restart", "deployment/web"]);
    rollout_status(&s);
    assert_eq!(replicaset_count(&s), 4);
    let restarted = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].metadata.annotations.kubectl\\.kubernetes\\.io/restartedAt}",
    ]);
    assert_eq!(restarted.split_whitespace().count(), 3, "{restarted}");

    // scale both ways through the scale subresource.
    s.ok(&["scale", "deployment/web", "--replicas=5"]);
    wait_row(&s, ["web", "5/5", "5", "5"]);
    rollout_status(&s);
    s.ok(&["scale", "deployment/web", "--replicas=1"]);
    wait_row(&s, ["web", "1/1", "1", "1"]);
    wait_pods(&s, 1, "nginx:1.27");

    // delete: the garbage collector takes the ReplicaSets and their pods.
    s.ok(&["delete", "deployment/web"]);
    wait_pods(&s, 0, "nginx:1.27");
    wait_output(&s, &["get", "rs", "-l", "app=web", "-o", "name"], "");
}

#[test]
fn kubectl_rollout_status_should_fail_past_the_progress_deadline() {
    let (s, _tmp) = start();
    let _kubelet = Kubelet::start(&s);
    let stuck = DEPLOYMENT
        .replace("nginx:1.25", NEVER_READY)
        .replace("replicas: 3", "replicas: 2\n  progressDeadlineSeconds: 2");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &stuck);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("exceeded its progress deadline"),
        "{stderr}"
    );
    wait_row(&s, ["web", "0/2", "2", "0"]);
}
