//! The `pvc-protection` and `pv-protection` loops: storage objects in use are not removed.
//! - A claim carries `kubernetes.io/pvc-protection`; once it is being deleted, the finalizer
//!   is removed when no pod of its namespace that has not finished names it.
//! - A volume carries `kubernetes.io/pv-protection`; once it is being deleted, the finalizer
//!   is removed when it is not `Bound`.
//!
//! Kubernetes adds these finalizers at admission as well; here the loops add them to every
//! live object, so a claim deleted in the instant after its creation may go at once — as
//! one no pod had yet used.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use setpoint_runtime::{
    add_finalizer, remove_finalizer, Action, Client, Controller, ControllerError, FinalizerError,
    ObjectCache, ObjectKey,
};
use tokio_util::sync::CancellationToken;

use crate::LoopContext;

/// The claim finalizer.
pub(crate) const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The volume finalizer.
pub(crate) const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

struct Claims {
    client: Client,
    pods: ObjectCache<Pod>,
}

fn has(meta: &kube::api::ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// The claims a pod names.
fn claims_of(pod: &Pod) -> Vec<ObjectKey> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| ObjectKey::namespaced(namespace.clone(), c.claim_name.clone()))
        .collect()
}

/// Runs `pvc-protection` until `shutdown` is cancelled.
pub(crate) async fn run_claims(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let claims = Arc::new(Claims {
        client: ctx.client.clone(),
        pods: ctx.factory.informer::<Pod>().store(),
    });
    Controller::<PersistentVolumeClaim>::new(&ctx.factory)
        .named("pvc-protection")
        .registered_in(&ctx.metrics)
        .watches::<Pod, _>(claims_of)
        .run(reconcile_claim, claims, shutdown.cancelled_owned())
        .await
}

async fn reconcile_claim(
    claim: Arc<PersistentVolumeClaim>,
    c: Arc<Claims>,
) -> Result<Action, FinalizerError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let api = c.client.namespaced_api::<PersistentVolumeClaim>(&namespace);
    let protected = has(&claim.metadata, PVC_PROTECTION);
    if claim.metadata.deletion_timestamp.is_none() {
        if !protected {
            add_finalizer(&api, &name, PVC_PROTECTION).await?;
        }
        return Ok(Action::await_change());
    }
    if !protected {
        return Ok(Action::await_change());
    }
    let key = ObjectKey::of(claim.as_ref());
    let in_use = c.pods.list_namespace(&namespace).iter().any(|pod| {
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        !finished && claims_of(pod).contains(&key)
    });
    if in_use {
        return Ok(Action::await_change());
    }
    remove_finalizer(&api, &name, PVC_PROTECTION).await?;
    Ok(Action::await_change())
}

/// Runs `pv-protection` until `shutdown` is cancelled.
pub(crate) async fn run_volumes(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    Controller::<PersistentVolume>::new(&ctx.factory)
        .named("pv-protection")
        .registered_in(&ctx.metrics)
        .run(
            reconcile_volume,
            Arc::new(ctx.client),
            shutdown.cancelled_owned(),
        )
        .await
}

async fn reconcile_volume(
    volume: Arc<PersistentVolume>,
    client: Arc<Client>,
) -> Result<Action, FinalizerError> {
    let name = volume.metadata.name.clone().unwrap_or_default();
    let api = client.api::<PersistentVolume>();
    let protected = has(&volume.metadata, PV_PROTECTION);
    if volume.metadata.deletion_timestamp.is_none() {
        if !protected {
            add_finalizer(&api, &name, PV_PROTECTION).await?;
        }
        return Ok(Action::await_change());
    }
    let bound = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if protected && !bound {
        remove_finalizer(&api, &name, PV_PROTECTION).await?;
    }
    Ok(Action::await_change())
}
