//! Scheduler throughput: how many pods a second the scheduler binds with 100 nodes.
//!
//! Everything runs in this process: Setpoint's API server on a memory store (`TestEnv`), 100
//! Ready nodes (64 cpus, 256 GiB, 110 pods each), then 10,000 pending pods (100m cpu, 128 MiB
//! each) created up front, 64 at a time, before the scheduler starts. Only the scheduler loop
//! runs. A separate pod informer (its own watch) notes each pod's first appearance with a node;
//! the figure is binds per second from the first bind to the last. At the end the bench checks
//! every pod is bound and no node holds more than it can.
//!
//! ```sh
//! cargo run --release -p setpoint-controllers --example scheduler_bench            # 10,000 pods
//! cargo run --release -p setpoint-controllers --example scheduler_bench -- --quick # 5,000 pods
//! cargo run --release -p setpoint-controllers --example scheduler_bench -- --nodes 100 --pods 20000
//! ```

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::json;
use setpoint_controllers::{LoopContext, LoopSelection};
use setpoint_runtime::{EventHandler, InformerFactory};
use setpoint_testenv::TestEnv;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Writes at once while setting up.
const SETUP_CONCURRENCY: usize = 64;
/// The target the issue sets, in pods bound per second.
const TARGET_PER_SECOND: f64 = 1_000.0;

/// What the bench is asked to do.
struct Args {
    nodes: usize,
    pods: usize,
}

fn args() -> Args {
    let mut a = Args {
        nodes: 100,
        pods: 10_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut number = |what: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{what} needs a number"))
        };
        match arg.as_str() {
            "--quick" => a.pods = 5_000,
            "--nodes" => a.nodes = number("--nodes"),
            "--pods" => a.pods = number("--pods"),
            "--bench" => {}
            other => panic!("unknown argument {other:?} (use --quick, --nodes N, --pods N)"),
        }
    }
    a
}

/// Notes when each pod is first seen bound.
#[derive(Default)]
struct Binds {
    state: Mutex<BindState>,
    all: Notify,
}

#[derive(Default)]
struct BindState {
    seen: HashSet<String>,
    first: Option<Instant>,
    last: Option<Instant>,
    per_node: BTreeMap<String, usize>,
    expected: usize,
}

impl Binds {
    fn observe(&self, pod: &Pod) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return;
        };
        let now = Instant::now();
        let mut s = self.state.lock();
        if s.seen.insert(pod.metadata.name.clone().unwrap_or_default()) {
            s.first.get_or_insert(now);
            s.last = Some(now);
            *s.per_node.entry(node).or_insert(0) += 1;
            if s.seen.len() == s.expected {
                self.all.notify_one();
            }
        }
    }
}

struct Observer(Arc<Binds>);

impl EventHandler<Pod> for Observer {
    fn on_add(&self, pod: &Arc<Pod>, _in_initial_list: bool) {
        self.0.observe(pod);
    }

    fn on_update(&self, _old: &Arc<Pod>, new: &Arc<Pod>) {
        self.0.observe(new);
    }
}

#[tokio::main]
async fn main() {
    let args = args();
    let env = TestEnv::start_with_watch_window(4 * args.pods + 1_000)
        .await
        .expect("test env");
    let client = env.client();

    let setup = Instant::now();
    let nodes = client.api::<Node>();
    futures::stream::iter(0..args.nodes)
        .map(|i| {
            let nodes = nodes.clone();
            async move {
                let name = format!("node-{i:03}");
                let node: Node =
                    serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
                nodes
                    .create(&PostParams::default(), &node)
                    .await
                    .expect("create node");
                nodes
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {
                            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                            "conditions": [{"type": "Ready", "status": "True"}],
                        }})),
                    )
                    .await
                    .expect("node status");
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .collect::<()>()
        .await;
    let pods = client.namespaced_api::<Pod>("default");
    futures::stream::iter(0..args.pods)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("pod-{i:05}"), "labels": {"app": "bench"}},
                    "spec": {"containers": [{
                        "name": "app",
                        "image": "nginx:1.25",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    }]},
                }))
                .expect("pod");
                pods.create(&PostParams::default(), &pod)
                    .await
                    .expect("create pod");
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .collect::<()>()
        .await;
    println!(
        "setup: {} nodes and {} pending pods created in {:.1} s",
        args.nodes,
        args.pods,
        setup.elapsed().as_secs_f64()
    );

    let binds = Arc::new(Binds::default());
    binds.state.lock().expected = args.pods;
    let observer_factory = InformerFactory::new(client.clone());
    let observer = observer_factory.informer::<Pod>();
    let registration = observer.add_handler(Observer(binds.clone()));
    observer_factory.start();
    observer_factory.wait_for_sync().await;

    let shutdown = CancellationToken::new();
    let selection: LoopSelection = "scheduler".parse().expect("known loop");
    let started = Instant::now();
    let scheduler = tokio::spawn({
        let ctx = LoopContext::new(client.clone());
        let token = shutdown.clone();
        async move { setpoint_controllers::run(ctx, &selection, token).await }
    });
    let all = binds.all.notified();
    if tokio::time::timeout(Duration::from_secs(600), all)
        .await
        .is_err()
    {
        let bound = binds.state.lock().seen.len();
        panic!("only {bound} of {} pods bound within 10 minutes", args.pods);
    }
    let done = Instant::now();
    shutdown.cancel();
    scheduler
        .await
        .expect("scheduler task")
        .expect("scheduler loop");
    registration.remove();
    observer_factory.shut_down();

    let s = binds.state.lock();
    let (first, last) = (s.first.expect("a bind"), s.last.expect("a bind"));
    let window = last.duration_since(first).as_secs_f64();
    let rate = (args.pods.saturating_sub(1)) as f64 / window.max(f64::EPSILON);
    let max_per_node = s.per_node.values().copied().max().unwrap_or(0);
    let min_per_node = s.per_node.values().copied().min().unwrap_or(0);
    assert!(max_per_node <= 110, "a node holds {max_per_node} pods");
    println!(
        "scheduler start → first bind: {:.3} s",
        first.duration_since(started).as_secs_f64()
    );
    println!(
        "first → last bind: {window:.3} s for {} pods: {rate:.0} pods/s (target ≥ {TARGET_PER_SECOND:.0}: {})",
        args.pods,
        if rate >= TARGET_PER_SECOND { "met" } else { "NOT met" }
    );
    println!(
        "scheduler start → all bound: {:.3} s ({:.0} pods/s)",
        done.duration_since(started).as_secs_f64(),
        args.pods as f64 / done.duration_since(started).as_secs_f64()
    );
    println!(
        "pods per node: min {min_per_node}, max {max_per_node} over {} nodes",
        s.per_node.len()
    );
}
