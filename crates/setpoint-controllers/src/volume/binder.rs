//! The `persistentvolume-binder` loop: two controllers over one set of caches, one per
//! side of a binding.
//!
//! A claim's reconcile binds it (in a `WaitForFirstConsumer` class only once the scheduler
//! has annotated it with its first consumer's node; a static volume's node affinity is not
//! checked against that node): the volume first (`spec.claimRef` with the claim's uid — a
//! write guarded by the volume's resourceVersion, so two claims cannot take one volume), then
//! the claim (`spec.volumeName`, annotations `pv.kubernetes.io/bind-completed` and
//! `…/bound-by-controller`), then both phases `Bound`. Each step is seen by the next
//! reconcile in the caches, so a binding interrupted anywhere is completed, never doubled. A
//! claim without a class gets the default StorageClass's name (Kubernetes' retroactive
//! default class assignment).
//!
//! A volume's reconcile keeps its phase: `Available` without a claim (or pre-bound to one
//! that does not exist yet), `Bound`, `Released` once its claim is gone; then its reclaim
//! policy: `Retain` keeps it `Released`; `Delete` deletes local-path volumes (their node's
//! agent removes the directory before the `setpoint.dev/local-path-cleanup` finalizer lets
//! the object go) and marks others `Failed` (no deleter for them); `Recycle` is `Failed`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use setpoint_runtime::{Action, Client, Controller, ControllerError, ObjectCache, ObjectKey};
use tokio_util::sync::CancellationToken;

use super::{
    default_class, matching, BIND_COMPLETED, BOUND_BY_CONTROLLER, LOCAL_PATH_PROVISIONER,
    PROVISIONED_BY,
};
use crate::scheduler::SELECTED_NODE;
use crate::LoopContext;

/// The controllers' name, as kube-controller-manager names the loop.
const NAME: &str = "persistentvolume-binder";
/// How soon a step whose result the caches do not show yet is looked at again.
const SOON: Duration = Duration::from_millis(500);

/// Why a reconcile failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub(crate) struct BindError {
    what: String,
    #[source]
    source: kube::Error,
}

fn failed(what: impl Into<String>) -> impl FnOnce(kube::Error) -> BindError {
    let what = what.into();
    move |source| BindError { what, source }
}

/// What both controllers read.
struct Binder {
    client: Client,
    claims: ObjectCache<PersistentVolumeClaim>,
    volumes: ObjectCache<PersistentVolume>,
    classes: ObjectCache<StorageClass>,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let binder = Arc::new(Binder {
        client: ctx.client.clone(),
        claims: ctx.factory.informer::<PersistentVolumeClaim>().store(),
        volumes: ctx.factory.informer::<PersistentVolume>().store(),
        classes: ctx.factory.informer::<StorageClass>().store(),
    });
    let claims = Controller::<PersistentVolumeClaim>::new(&ctx.factory)
        .named(format!("{NAME}-claims"))
        .registered_in(&ctx.metrics)
        .watches::<PersistentVolume, _>(|pv| claim_of(pv).into_iter())
        .watches::<StorageClass, _>({
            let claims = binder.claims.clone();
            move |_| {
                claims
                    .list()
                    .iter()
                    .filter(|c| c.spec.as_ref().is_some_and(|s| s.volume_name.is_none()))
                    .map(|c| ObjectKey::of(c.as_ref()))
                    .collect::<Vec<_>>()
            }
        })
        .run(
            reconcile_claim,
            binder.clone(),
            shutdown.clone().cancelled_owned(),
        );
    let volumes = Controller::<PersistentVolume>::new(&ctx.factory)
        .named(format!("{NAME}-volumes"))
        .registered_in(&ctx.metrics)
        .watches::<PersistentVolumeClaim, _>({
            let volumes = binder.volumes.clone();
            move |claim| {
                let mut keys: Vec<ObjectKey> = claim
                    .spec
                    .as_ref()
                    .and_then(|s| s.volume_name.clone())
                    .map(ObjectKey::cluster)
                    .into_iter()
                    .collect();
                // Volumes naming the claim (it may be gone: they are released).
                keys.extend(
                    volumes
                        .list()
                        .iter()
                        .filter(|v| claim_of(v).is_some_and(|k| k == ObjectKey::of(claim)))
                        .map(|v| ObjectKey::of(v.as_ref())),
                );
                keys
            }
        })
        .run(reconcile_volume, binder, shutdown.cancelled_owned());
    let (a, b) = tokio::join!(claims, volumes);
    a.and(b)
}

/// The claim a volume's `claimRef` names.
fn claim_of(volume: &PersistentVolume) -> Option<ObjectKey> {
    let r = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ObjectKey::namespaced(
        r.namespace.clone().unwrap_or_default(),
        r.name.clone().unwrap_or_default(),
    ))
}

fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn phase_of_claim(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim.status.as_ref()?.phase.as_deref()
}

fn phase_of_volume(volume: &PersistentVolume) -> Option<&str> {
    volume.status.as_ref()?.phase.as_deref()
}

async fn reconcile_claim(
    claim: Arc<PersistentVolumeClaim>,
    b: Arc<Binder>,
) -> Result<Action, BindError> {
    if claim.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = claim.metadata.name.clone().unwrap_or_default();
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let claims = b.client.namespaced_api::<PersistentVolumeClaim>(&namespace);
    let spec = claim.spec.clone().unwrap_or_default();
    let volume_name = spec.volume_name.clone().filter(|v| !v.is_empty());

    let Some(volume_name) = volume_name else {
        if spec.storage_class_name.is_none() {
            if let Some(class) = default_class(&b.classes) {
                claims
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"storageClassName": class}})),
                    )
                    .await
                    .map_err(failed(format!(
                        "giving claim {namespace}/{name} the default class"
                    )))?;
                return Ok(Action::await_change());
            }
        }
        // A class that waits for a first consumer binds only once the scheduler has chosen
        // the consumer's node (then a volume provisioned there, or a matching one).
        let waits = spec
            .storage_class_name
            .as_deref()
            .and_then(|c| b.classes.get(&ObjectKey::cluster(c)))
            .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
        if waits && annotation(&claim.metadata, SELECTED_NODE).is_none() {
            set_claim_phase(&b, &claim, "Pending").await?;
            return Ok(Action::await_change());
        }
        let volumes = b.volumes.list();
        let Some(volume) = matching::best(&claim, volumes.iter().map(AsRef::as_ref)) else {
            set_claim_phase(&b, &claim, "Pending").await?;
            return Ok(Action::await_change());
        };
        let volume_name = volume.metadata.name.clone().unwrap_or_default();
        let prebound_uid = volume
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.as_deref())
            .is_some_and(|u| u == uid);
        if !prebound_uid {
            claim_volume(&b, volume, &claim).await?;
        }
        claims
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
                    "spec": {"volumeName": volume_name},
                })),
            )
            .await
            .map_err(failed(format!("binding claim {namespace}/{name}")))?;
        return Ok(Action::requeue(SOON));
    };

    let Some(volume) = b.volumes.get(&ObjectKey::cluster(&volume_name)) else {
        let phase = if phase_of_claim(&claim) == Some("Bound") {
            "Lost"
        } else {
            "Pending"
        };
        set_claim_phase(&b, &claim, phase).await?;
        return Ok(Action::await_change());
    };
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.clone());
    match claim_ref {
        None => {
            // Pre-bound by the user through `volumeName`: take the volume.
            claim_volume(&b, &volume, &claim).await?;
            return Ok(Action::requeue(SOON));
        }
        Some(r)
            if r.name.as_deref() == Some(name.as_str())
                && r.namespace.as_deref() == Some(namespace.as_str()) =>
        {
            if r.uid.as_deref() != Some(uid.as_str()) {
                claim_volume(&b, &volume, &claim).await?;
                return Ok(Action::requeue(SOON));
            }
        }
        Some(_) => {
            set_claim_phase(&b, &claim, "Pending").await?;
            return Ok(Action::await_change());
        }
    }
    if phase_of_volume(&volume) != Some("Bound") {
        set_volume_phase(&b, &volume, "Bound", None).await?;
    }
    if annotation(&claim.metadata, BIND_COMPLETED) != Some("yes") {
        claims
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {BIND_COMPLETED: "yes"}}})),
            )
            .await
            .map_err(failed(format!("annotating claim {namespace}/{name}")))?;
    }
    let volume_spec = volume.spec.clone().unwrap_or_default();
    let status = json!({
        "phase": "Bound",
        "accessModes": volume_spec.access_modes.unwrap_or_default(),
        "capacity": volume_spec.capacity.unwrap_or_default(),
    });
    let current = serde_json::to_value(&claim.status).unwrap_or_default();
    let same = ["phase", "accessModes", "capacity"]
        .iter()
        .all(|k| current[*k] == status[*k]);
    if !same {
        claims
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .map_err(failed(format!(
                "writing the status of claim {namespace}/{name}"
            )))?;
    }
    Ok(Action::await_change())
}

/// Points `volume`'s `claimRef` at `claim` (with its uid), guarded by the volume's
/// resourceVersion; marks it bound by the controller unless the user pre-bound it.
async fn claim_volume(
    b: &Binder,
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Result<(), BindError> {
    let volume_name = volume.metadata.name.clone().unwrap_or_default();
    let prebound = volume.spec.as_ref().is_some_and(|s| s.claim_ref.is_some());
    let reference = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("PersistentVolumeClaim".to_owned()),
        name: claim.metadata.name.clone(),
        namespace: claim.metadata.namespace.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..ObjectReference::default()
    };
    let mut metadata = json!({"resourceVersion": volume.metadata.resource_version});
    if !prebound {
        metadata["annotations"] = json!({BOUND_BY_CONTROLLER: "yes"});
    }
    b.client
        .api::<PersistentVolume>()
        .patch(
            &volume_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": metadata, "spec": {"claimRef": reference}})),
        )
        .await
        .map_err(failed(format!("binding volume {volume_name}")))?;
    Ok(())
}

async fn set_claim_phase(
    b: &Binder,
    claim: &PersistentVolumeClaim,
    phase: &str,
) -> Result<(), BindError> {
    if phase_of_claim(claim) == Some(phase) {
        return Ok(());
    }
    let name = claim.metadata.name.clone().unwrap_or_default();
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    b.client
        .namespaced_api::<PersistentVolumeClaim>(&namespace)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .map_err(failed(format!(
            "writing the phase of claim {namespace}/{name}"
        )))?;
    Ok(())
}

async fn set_volume_phase(
    b: &Binder,
    volume: &PersistentVolume,
    phase: &str,
    message: Option<&str>,
) -> Result<(), BindError> {
    let current = volume.status.as_ref();
    if current.and_then(|s| s.phase.as_deref()) == Some(phase)
        && current.and_then(|s| s.message.as_deref()) == message
    {
        return Ok(());
    }
    let name = volume.metadata.name.clone().unwrap_or_default();
    b.client
        .api::<PersistentVolume>()
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase, "message": message}})),
        )
        .await
        .map_err(failed(format!("writing the phase of volume {name}")))?;
    Ok(())
}

async fn reconcile_volume(
    volume: Arc<PersistentVolume>,
    b: Arc<Binder>,
) -> Result<Action, BindError> {
    let spec = volume.spec.clone().unwrap_or_default();
    let Some(claim_ref) = spec.claim_ref.clone() else {
        if volume.metadata.deletion_timestamp.is_none() {
            set_volume_phase(&b, &volume, "Available", None).await?;
        }
        return Ok(Action::await_change());
    };
    let key = ObjectKey::namespaced(
        claim_ref.namespace.clone().unwrap_or_default(),
        claim_ref.name.clone().unwrap_or_default(),
    );
    let claim = b.claims.get(&key);
    let ref_uid = claim_ref.uid.clone().filter(|u| !u.is_empty());
    let volume_name = volume.metadata.name.clone().unwrap_or_default();
    match (&claim, &ref_uid) {
        (Some(claim), None) => {
            // Pre-bound to a claim by name: available to it only, until it binds.
            let _ = claim;
            set_volume_phase(&b, &volume, "Available", None).await?;
            return Ok(Action::await_change());
        }
        (None, None) => {
            set_volume_phase(&b, &volume, "Available", None).await?;
            return Ok(Action::await_change());
        }
        (Some(claim), Some(uid)) if claim.metadata.uid.as_deref() == Some(uid.as_str()) => {
            let claim_volume = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref());
            if claim_volume == Some(volume_name.as_str()) {
                set_volume_phase(&b, &volume, "Bound", None).await?;
                return Ok(Action::await_change());
            }
            if claim_volume.is_some()
                && annotation(&volume.metadata, BOUND_BY_CONTROLLER) == Some("yes")
            {
                // The claim went to another volume: let this one go.
                b.client
                    .api::<PersistentVolume>()
                    .patch(
                        &volume_name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"claimRef": null}})),
                    )
                    .await
                    .map_err(failed(format!("unbinding volume {volume_name}")))?;
            }
            // Half-bound: the claim's reconcile finishes it.
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
        _ => {}
    }
    // The claim is gone (or replaced by another of the same name): released, then reclaimed.
    let local = annotation(&volume.metadata, PROVISIONED_BY) == Some(LOCAL_PATH_PROVISIONER);
    match spec.persistent_volume_reclaim_policy.as_deref() {
        Some("Delete") if !local => {
            let message = "reclaim policy Delete: no deleter for this kind of volume (only setpoint.dev/local-path volumes are deleted)";
            set_volume_phase(&b, &volume, "Failed", Some(message)).await?;
        }
        Some("Recycle") => {
            let message = "reclaim policy Recycle is not supported";
            set_volume_phase(&b, &volume, "Failed", Some(message)).await?;
        }
        Some("Delete") => {
            set_volume_phase(&b, &volume, "Released", None).await?;
            if volume.metadata.deletion_timestamp.is_none() {
                match b
                    .client
                    .api::<PersistentVolume>()
                    .delete(&volume_name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(failed(format!("deleting volume {volume_name}"))(e)),
                }
            }
        }
        _ => set_volume_phase(&b, &volume, "Released", None).await?,
    }
    Ok(Action::await_change())
}
