//! The garbage collector (kube-controller-manager's `garbage-collector-controller`): deletes
//! objects whose owners are gone, and carries out foreground and orphan deletion.
//!
//! - Discovery finds every resource that can be listed, watched and deleted (events aside);
//!   a shared informer per resource feeds the [`graph`] of owners and dependents, keyed by uid
//!   ([`builder`]). Discovery runs again every 30 seconds, and at once when a
//!   CustomResourceDefinition is added, changed or deleted; new resources are watched. Nodes
//!   whose owner's kind was unknown are retried as soon as discovery finds new resources, not
//!   after their backoff.
//! - Graph changes queue work: the attempt-to-delete queue ([`attempt_delete`]) gets the
//!   dependents of a deleted owner, owners nobody has observed yet (to verify), and owners
//!   being deleted in the foreground; the attempt-to-orphan queue ([`orphan`]) gets owners
//!   being deleted with the `orphan` finalizer.
//! - Workers decide on live reads ([`live`]), never on the cache: an object is deleted only
//!   after a GET of each owner it names found it missing (or holding another uid), so an object
//!   whose owner is merely not cached yet is never deleted.
//!
//! Workers start once every informer's handler has its initial list (or after 30 seconds, as
//! kube-controller-manager does), so an owner deleting in the foreground never drops its
//! finalizer before its dependents are known.

mod attempt_delete;
mod builder;
mod graph;
mod live;
mod mapper;
mod orphan;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::PartialObjectMeta;
use parking_lot::{Mutex, RwLock};
use setpoint_runtime::{
    ControllerError, Deleted, EventHandler, HandlerRegistration, InformerOptions, WorkQueue,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use self::attempt_delete::Outcome;
use self::builder::GraphBuilder;
use self::graph::{Graph, Uid, Work};
use self::live::{Live, LiveError};
use self::mapper::Mapper;
use crate::LoopContext;

/// Workers on the attempt-to-delete queue (kube-controller-manager runs 20 on larger machines).
const DELETE_WORKERS: usize = 5;
/// Workers on the attempt-to-orphan queue.
const ORPHAN_WORKERS: usize = 2;
/// How often discovery runs again to find new resources.
const REDISCOVERY: Duration = Duration::from_secs(30);
/// How long workers wait for the graph's initial lists before starting anyway.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// What the graph builder and the workers share.
pub(super) struct Collector {
    graph: Mutex<Graph>,
    live: Live,
    delete_queue: WorkQueue<Uid>,
    orphan_queue: WorkQueue<Uid>,
    /// Nodes whose last attempt failed because discovery knew no resource for an owner's (or
    /// their own) kind: queued again, without waiting for their backoff, when discovery finds
    /// new resources.
    unresolved: Mutex<HashSet<Uid>>,
}

impl Collector {
    /// Queues the work a graph change asks for.
    fn schedule(&self, work: Work) {
        for uid in work.attempt_to_delete {
            self.delete_queue.add(uid);
        }
        for uid in work.attempt_to_orphan {
            self.orphan_queue.add(uid);
        }
    }
}

/// The informers the collector has handlers on, by resource.
#[derive(Default)]
struct Watches {
    /// `group/plural` of each watched resource.
    resources: HashSet<String>,
    registrations: Vec<HandlerRegistration>,
}

impl Watches {
    /// Watches every resource `mapper` lists that is not watched yet; returns how many.
    fn extend(&mut self, ctx: &LoopContext, mapper: &Mapper, collector: &Arc<Collector>) -> usize {
        let mut added = 0;
        for served in mapper.watched() {
            let key = format!("{}/{}", served.resource.group, served.resource.plural);
            if !self.resources.insert(key) {
                continue;
            }
            added += 1;
            let informer = ctx.factory.dynamic_metadata_informer(
                &served.resource,
                InformerOptions::default().strip_managed_fields(),
            );
            self.registrations.push(informer.add_handler(GraphBuilder {
                resource: served.resource.clone(),
                collector: collector.clone(),
            }));
            tracing::debug!(resource = %served.resource.plural, group = %served.resource.group, "garbage collector watches");
        }
        ctx.factory.start();
        added
    }

    fn synced(&self) -> bool {
        self.registrations
            .iter()
            .all(HandlerRegistration::has_synced)
    }
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let kube = ctx.client.kube().clone();
    let Some(first) = discover_until_ok(&kube, &shutdown).await else {
        return Ok(());
    };
    let mapper = Arc::new(RwLock::new(first));
    let collector = Arc::new(Collector {
        graph: Mutex::new(Graph::default()),
        live: Live::new(kube.clone(), mapper.clone()),
        delete_queue: WorkQueue::new(),
        orphan_queue: WorkQueue::new(),
        unresolved: Mutex::new(HashSet::new()),
    });
    // The queues as kube-controller-manager's garbage collector names them.
    for (name, queue) in [
        (
            "garbage_collector_attempt_to_delete",
            &collector.delete_queue,
        ),
        (
            "garbage_collector_attempt_to_orphan",
            &collector.orphan_queue,
        ),
    ] {
        let queue = queue.clone();
        ctx.metrics.add_queue(name, move || queue.metrics());
    }
    let mut watches = Watches::default();
    watches.extend(&ctx, &mapper.read(), &collector);
    let crds_changed = Arc::new(Notify::new());
    let crd_watch = ctx
        .factory
        .metadata_informer::<CustomResourceDefinition>()
        .add_handler(CrdChanged(crds_changed.clone()));
    ctx.factory.start();

    let deadline = tokio::time::Instant::now() + SYNC_TIMEOUT;
    while !watches.synced() {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                "garbage collector: starting before every resource's initial list arrived"
            );
            break;
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }

    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..DELETE_WORKERS {
        workers.spawn(delete_worker(collector.clone(), shutdown.clone()));
    }
    for _ in 0..ORPHAN_WORKERS {
        workers.spawn(orphan_worker(collector.clone(), shutdown.clone()));
    }

    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(REDISCOVERY) => {}
            () = crds_changed.notified() => {}
        }
        match Mapper::discover(&kube).await {
            Ok(found) => {
                *mapper.write() = found;
                if watches.extend(&ctx, &mapper.read(), &collector) > 0 {
                    let unresolved = std::mem::take(&mut *collector.unresolved.lock());
                    for uid in unresolved {
                        collector.delete_queue.add(uid);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "garbage collector: discovery failed"),
        }
    }
    collector.delete_queue.shut_down();
    collector.orphan_queue.shut_down();
    while workers.join_next().await.is_some() {}
    for registration in watches.registrations {
        registration.remove();
    }
    crd_watch.remove();
    Ok(())
}

/// Wakes the discovery loop when a CustomResourceDefinition is added, changed (its status
/// turning `Established`, say) or deleted, so a new resource is watched as soon as it is
/// served rather than at the next periodic rediscovery.
struct CrdChanged(Arc<Notify>);

impl EventHandler<PartialObjectMeta<CustomResourceDefinition>> for CrdChanged {
    fn on_add(&self, _: &Arc<PartialObjectMeta<CustomResourceDefinition>>, initial: bool) {
        if !initial {
            self.0.notify_one();
        }
    }

    fn on_update(
        &self,
        old: &Arc<PartialObjectMeta<CustomResourceDefinition>>,
        new: &Arc<PartialObjectMeta<CustomResourceDefinition>>,
    ) {
        if old.metadata.resource_version != new.metadata.resource_version {
            self.0.notify_one();
        }
    }

    fn on_delete(&self, _: &Deleted<PartialObjectMeta<CustomResourceDefinition>>) {
        self.0.notify_one();
    }
}

/// Discovery, retried every few seconds until it works; `None` if shut down first.
async fn discover_until_ok(kube: &kube::Client, shutdown: &CancellationToken) -> Option<Mapper> {
    loop {
        match Mapper::discover(kube).await {
            Ok(m) => return Some(m),
            Err(e) => tracing::warn!(error = %e, "garbage collector: discovery failed; retrying"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// Takes nodes off the attempt-to-delete queue until shutdown; an item in progress finishes.
async fn delete_worker(collector: Arc<Collector>, shutdown: CancellationToken) {
    loop {
        let claim = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            claim = collector.delete_queue.next() => match claim {
                Some(c) => c,
                None => return,
            },
        };
        match collector.attempt_to_delete(claim.key()).await {
            Ok(Outcome::Done) => claim.done(),
            Ok(Outcome::Retry) => claim.retry(),
            Err(e) => {
                tracing::warn!(uid = %claim.key(), error = %e, "garbage collector: attempt to delete failed; retrying");
                if matches!(e, LiveError::UnknownKind { .. }) {
                    collector.unresolved.lock().insert(claim.key().clone());
                }
                claim.retry();
            }
        }
    }
}

/// Takes owners off the attempt-to-orphan queue until shutdown.
async fn orphan_worker(collector: Arc<Collector>, shutdown: CancellationToken) {
    loop {
        let claim = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            claim = collector.orphan_queue.next() => match claim {
                Some(c) => c,
                None => return,
            },
        };
        match collector.attempt_to_orphan(claim.key()).await {
            Ok(()) => claim.done(),
            Err(e) => {
                tracing::warn!(uid = %claim.key(), error = %e, "garbage collector: orphaning failed; retrying");
                claim.retry();
            }
        }
    }
}
