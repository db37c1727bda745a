//! The scheduler (kube-scheduler's `default-scheduler`): binds each pod that has no node, names
//! no other scheduler, and is neither terminating nor finished, to a node that can take it,
//! through `pods/{name}/binding`.
//!
//! - [`cache`]: nodes and the running totals of what their pods request; one decision filters
//!   every node ([`filter`]: readiness, cordon, taints, node selector and affinity, requests)
//!   and scores those that fit ([`score`]: least allocated), then *assumes* the pod on the
//!   winner at once, so the next decision counts it before the binding is even sent.
//! - [`handlers`]: informer events keep the cache in step, queue pods that need a node, and
//!   move unschedulable pods back to the queue when a node is added or changes or a placed pod
//!   goes.
//! - [`volumes`]: what a pod's PersistentVolumeClaims ask of its node, and the
//!   `volume.kubernetes.io/selected-node` annotation of claims that wait for a first consumer.
//! - [`outcome`]: bindings, and the `PodScheduled=False` status and `FailedScheduling` Event of
//!   a pod no node can take, run concurrently (up to [`MAX_IN_FLIGHT`]) while decisions go on.
//!
//! Decisions are made one at a time, in memory; only their outcomes touch the API. Promises:
//! a pod is never bound twice by this scheduler, and a burst never overcommits a node (every
//! decision counts the pods assumed before it). Design and invariants:
//! `docs/design/controllers.md`.

mod cache;
mod filter;
mod handlers;
mod node_info;
mod outcome;
mod resources;
mod score;
mod volumes;

pub(crate) use volumes::SELECTED_NODE;

pub(crate) use filter::{matches_node_selection, tolerates};
pub(crate) use resources::milli_value;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use parking_lot::Mutex;
use setpoint_runtime::{
    Backoff, ControllerError, EventRecorder, HandlerRegistration, ObjectCache, RateLimit, Reporter,
    SharedInformer, WorkQueue,
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::LoopContext;
use cache::{Cache, Decision};
use handlers::{NodeEvents, PodEvents};
use node_info::{needs_scheduling, PodInfo, SCHEDULER_NAME};
use outcome::Outcomes;

/// Bindings (and unschedulable reports) in flight at once. kube-scheduler binds each pod in
/// its own goroutine with no cap; this one is bounded, but as high as the ReplicaSet loop's
/// largest slow-start batch of creates, so a burst of new pods does not take most of the API
/// server's attention while their bindings queue here (with 32, pods of a 10,000-replica
/// Deployment waited up to 2 s to be bound).
const MAX_IN_FLIGHT: usize = 256;

/// How often the start-up waits look again at the handlers' first deliveries.
const SYNC_POLL: Duration = Duration::from_millis(10);

/// Runs the loop until `shutdown` is cancelled; outcomes in flight then finish.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let queue = WorkQueue::with_rate_limit(RateLimit {
        backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(10)),
        bucket: None,
    });
    {
        let queue = queue.clone();
        ctx.metrics.add_queue("scheduler", move || queue.metrics());
    }
    let cache = Arc::new(Mutex::new(Cache::default()));
    let pod_informer = ctx.factory.informer::<Pod>();
    let node_informer = ctx.factory.informer::<Node>();
    let claim_informer = ctx.factory.informer::<PersistentVolumeClaim>();
    let volume_informer = ctx.factory.informer::<PersistentVolume>();
    let class_informer = ctx.factory.informer::<StorageClass>();
    let volume_caches = volumes::VolumeCaches {
        claims: claim_informer.store(),
        volumes: volume_informer.store(),
        classes: class_informer.store(),
    };
    let volume_registrations = [
        claim_informer.add_handler(volumes::VolumeEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        }),
        volume_informer.add_handler(volumes::VolumeEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        }),
    ];
    let registrations = [
        node_informer.add_handler(NodeEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        }),
        pod_informer.add_handler(PodEvents {
            cache: cache.clone(),
            queue: queue.enqueuer(),
        }),
    ];
    ctx.factory.start();
    let started = tokio::select! {
        () = shutdown.cancelled() => false,
        () = async {
            synced(&pod_informer, &node_informer, &registrations).await;
            futures::join!(
                claim_informer.wait_until_synced(),
                volume_informer.wait_until_synced(),
                class_informer.wait_until_synced()
            );
        } => true,
    };
    if started {
        tracing::info!("scheduler caches synced; scheduling");
        let outcomes = Arc::new(Outcomes {
            recorder: EventRecorder::new(
                ctx.client.clone(),
                Reporter::new(SCHEDULER_NAME, "setpoint"),
            ),
            client: ctx.client,
            cache: cache.clone(),
            queue: queue.clone(),
        });
        decide(&outcomes, &pod_informer.store(), &volume_caches, &shutdown).await;
        outcomes.recorder.flush().await;
    }
    queue.shut_down();
    for r in registrations.into_iter().chain(volume_registrations) {
        r.remove();
    }
    Ok(())
}

/// Waits for the two informers' first lists and for both handlers to have been given them, so
/// the first decision sees every node and every placed pod.
async fn synced(
    pods: &SharedInformer<Pod>,
    nodes: &SharedInformer<Node>,
    registrations: &[HandlerRegistration],
) {
    futures::join!(pods.wait_until_synced(), nodes.wait_until_synced());
    while !registrations.iter().all(HandlerRegistration::has_synced) {
        tokio::time::sleep(SYNC_POLL).await;
    }
}

/// The decision loop: takes pods from the queue one at a time, decides in memory, and hands
/// the outcome to a task (at most [`MAX_IN_FLIGHT`] at once). On shutdown, waits for the
/// outcomes in flight.
async fn decide(
    out: &Arc<Outcomes>,
    pods: &ObjectCache<Pod>,
    volume_caches: &volumes::VolumeCaches,
    shutdown: &CancellationToken,
) {
    let mut in_flight = JoinSet::new();
    loop {
        while let Some(done) = in_flight.try_join_next() {
            log_panic(done);
        }
        if in_flight.len() >= MAX_IN_FLIGHT {
            if let Some(done) = in_flight.join_next().await {
                log_panic(done);
            }
            continue;
        }
        let claim = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            claim = out.queue.next() => claim,
        };
        let Some(claim) = claim else { break };
        let Some(pod) = pods.get(claim.key()).filter(|p| needs_scheduling(p)) else {
            claim.done();
            continue;
        };
        let needs = volumes::needs(volume_caches, &pod);
        let pod = PodInfo::of(pod);
        let decision = out.cache.lock().schedule_with(&pod, &needs);
        match decision {
            Decision::AlreadyPlaced => claim.done(),
            Decision::Bind(node) if needs.to_select.is_empty() => {
                in_flight.spawn(outcome::bind(out.clone(), pod, node, claim));
            }
            Decision::Bind(node) => {
                let out = out.clone();
                in_flight.spawn(async move {
                    match volumes::select_node(&out.client, &needs.to_select, &node).await {
                        Ok(()) => outcome::bind(out, pod, node, claim).await,
                        Err(e) => {
                            tracing::warn!(pod = %pod.key, error = %e, "annotating the pod's claims with its node");
                            outcome::retry(&out, &pod, claim);
                        }
                    }
                });
            }
            Decision::Unschedulable(message) => {
                in_flight.spawn(outcome::unschedulable(out.clone(), pod, message, claim));
            }
        }
    }
    while let Some(done) = in_flight.join_next().await {
        log_panic(done);
    }
}

fn log_panic(joined: Result<(), tokio::task::JoinError>) {
    if let Err(error) = joined {
        tracing::error!(%error, "scheduler outcome task failed");
    }
}
