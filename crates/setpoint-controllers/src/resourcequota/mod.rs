//! The ResourceQuota loop (kube-controller-manager's `resourcequota-controller`): keeps each
//! quota's `status.hard` equal to its `spec.hard` and `status.used` equal to what the objects
//! of its namespace that its scopes cover use of each limited resource ([`sync`]).
//!
//! Pods, services and claims are read from shared informers (their changes resync the quotas
//! of their namespace at once: a pod finishing or deleted gives its share back); other counted
//! kinds (`configmaps`, `secrets`, `count/<resource>.<group>`, …) are listed by their metadata
//! at each sync. Every quota is also synced again after [`FULL_RESYNC`], as kube-controller-
//! manager's `--resource-quota-sync-period` does. Creates are charged by quota admission in
//! the API server as they happen; this loop recounts (docs/design/quota.md). A count lower
//! than the recorded usage is written only once the quota has not been charged for
//! [`SETTLE`]: admission charges a pod before the pod is stored, so for a moment the quota
//! says more than the pod cache can show, and writing the lower count then would let a create
//! past the limit.

mod sync;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use kube::Resource;
use setpoint_runtime::{
    Client, Controller, ControllerError, InformerOptions, ObjectCache, ObjectKey,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;

/// The controller's name, as kube-controller-manager names it.
const NAME: &str = "resourcequota-controller";

/// How often every quota is counted again regardless of events (kube's default sync period).
pub(crate) const FULL_RESYNC: Duration = Duration::from_secs(300);

/// How long a quota must go uncharged before a lower count replaces its usage.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// What every sync shares.
pub(crate) struct Context {
    client: Client,
    /// Quotas whose count came out lower than their `status.used`, with the resource version
    /// that was seen and since when ([`sync`]: a decrease is written once it has settled).
    settling:
        parking_lot::Mutex<std::collections::HashMap<ObjectKey, (String, std::time::Instant)>>,
    pods: ObjectCache<Pod>,
    services: ObjectCache<Service>,
    claims: ObjectCache<PersistentVolumeClaim>,
}

/// The quotas of `object`'s namespace.
fn quotas_of<K: Resource>(quotas: &ObjectCache<ResourceQuota>, object: &K) -> Vec<ObjectKey> {
    let Some(ns) = object.meta().namespace.as_deref() else {
        return Vec::new();
    };
    quotas
        .list_namespace(ns)
        .iter()
        .filter_map(|q| {
            Some(ObjectKey {
                namespace: Some(ns.to_owned()),
                name: q.metadata.name.clone()?,
            })
        })
        .collect()
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let quotas = ctx.factory.informer::<ResourceQuota>().store();
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        settling: parking_lot::Mutex::default(),
        pods: ctx.factory.informer::<Pod>().store(),
        services: ctx.factory.informer::<Service>().store(),
        claims: ctx.factory.informer::<PersistentVolumeClaim>().store(),
    });
    let (q1, q2, q3) = (quotas.clone(), quotas.clone(), quotas);
    Controller::<ResourceQuota>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .concurrency(5)
        .watches_with(InformerOptions::<Pod>::default(), move |p| {
            quotas_of(&q1, p)
        })
        .watches_with(InformerOptions::<Service>::default(), move |s| {
            quotas_of(&q2, s)
        })
        .watches_with(
            InformerOptions::<PersistentVolumeClaim>::default(),
            move |c| quotas_of(&q3, c),
        )
        .run(sync::reconcile, context, shutdown.cancelled_owned())
        .await
}
