//! The `local-path-provisioner` loop: for an unbound claim of a StorageClass whose
//! provisioner is `setpoint.dev/local-path`, once a node is chosen for it (the scheduler's
//! `volume.kubernetes.io/selected-node`), creates a PersistentVolume `pvc-<claim uid>`:
//! - source `local.path` = `<root>/pvc-<uid>_<namespace>_<name>`, `<root>` being the node's
//!   `setpoint.dev/local-path-root` annotation (its agent publishes it; a claim waits until
//!   it has) or, for a simulated node (which has no agent), the class's `nodePath` parameter or
//!   `/var/lib/setpoint/local-path`;
//! - `nodeAffinity` to that node (`kubernetes.io/hostname`), the claim's size, access modes
//!   and volume mode, the class's reclaim policy (`Delete` by default);
//! - `claimRef` to the claim, so the binder binds exactly these two;
//! - annotations `pv.kubernetes.io/provisioned-by` and `setpoint.dev/local-path: <node>`,
//!   and — on a node with an agent — the finalizer `setpoint.dev/local-path-cleanup`, which
//!   that agent removes after deleting the directory (never while a pod of its uses it).
//!
//! The directory itself is made by the agent on first mount. A claim of such a class with
//! `volumeBindingMode: Immediate` is not provisioned (no node to put it on) and says so in an
//! event.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::PostParams;
use serde_json::json;
use setpoint_runtime::{
    Action, Client, Controller, ControllerError, EventDetails, EventRecorder, ObjectCache,
    ObjectKey, Reporter,
};
use tokio_util::sync::CancellationToken;

use super::{
    requested, LOCAL_PATH_CLEANUP, LOCAL_PATH_NODE, LOCAL_PATH_PROVISIONER, LOCAL_PATH_ROOT,
    PROVISIONED_BY,
};
use crate::scheduler::SELECTED_NODE;
use crate::LoopContext;

/// The loop's name.
const NAME: &str = "local-path-provisioner";
/// Where volumes go on a node that publishes no root.
const DEFAULT_ROOT: &str = "/var/lib/setpoint/local-path";

/// The label of simulated nodes (they have no agent, so no published root and no cleanup).
const SIMULATED_NODE_LABEL: &str = "setpoint.dev/simulated";

/// How soon a claim whose node has not published its root yet is looked at again.
const ROOT_WAIT: Duration = Duration::from_secs(1);

/// Why a provisioning failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("creating volume {name}: {source}")]
pub(crate) struct ProvisionError {
    name: String,
    #[source]
    source: kube::Error,
}

struct Provisioner {
    client: Client,
    classes: ObjectCache<StorageClass>,
    volumes: ObjectCache<PersistentVolume>,
    nodes: ObjectCache<Node>,
    recorder: EventRecorder,
}

/// Runs the loop until `shutdown` is cancelled.
pub(crate) async fn run(
    ctx: LoopContext,
    shutdown: CancellationToken,
) -> Result<(), ControllerError> {
    let provisioner = Arc::new(Provisioner {
        client: ctx.client.clone(),
        classes: ctx.factory.informer::<StorageClass>().store(),
        volumes: ctx.factory.informer::<PersistentVolume>().store(),
        nodes: ctx.factory.informer::<Node>().store(),
        recorder: EventRecorder::new(
            ctx.client.clone(),
            Reporter::new(LOCAL_PATH_PROVISIONER, "setpoint"),
        ),
    });
    let recorder = provisioner.recorder.clone();
    let result = Controller::<PersistentVolumeClaim>::new(&ctx.factory)
        .named(NAME)
        .registered_in(&ctx.metrics)
        .watches::<StorageClass, _>(|_| Vec::<ObjectKey>::new())
        .watches::<Node, _>(|_| Vec::<ObjectKey>::new())
        .watches::<PersistentVolume, _>(|_| Vec::<ObjectKey>::new())
        .run(reconcile, provisioner, shutdown.cancelled_owned())
        .await;
    recorder.flush().await;
    result
}

async fn reconcile(
    claim: Arc<PersistentVolumeClaim>,
    p: Arc<Provisioner>,
) -> Result<Action, ProvisionError> {
    let spec = claim.spec.clone().unwrap_or_default();
    if claim.metadata.deletion_timestamp.is_some()
        || spec.volume_name.as_deref().is_some_and(|v| !v.is_empty())
    {
        return Ok(Action::await_change());
    }
    let Some(class_name) = spec.storage_class_name.clone() else {
        return Ok(Action::await_change());
    };
    let Some(class) = p.classes.get(&ObjectKey::cluster(&class_name)) else {
        return Ok(Action::await_change());
    };
    if class.provisioner != LOCAL_PATH_PROVISIONER {
        return Ok(Action::await_change());
    }
    let selected = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SELECTED_NODE))
        .cloned();
    let Some(node_name) = selected else {
        if class.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
            p.recorder.publish_for(
                claim.as_ref(),
                EventDetails::warning("ProvisioningFailed", "Provisioning").with_note(format!(
                    "StorageClass {class_name:?}: {LOCAL_PATH_PROVISIONER} volumes live on one node and need volumeBindingMode WaitForFirstConsumer"
                )),
            );
        }
        return Ok(Action::await_change());
    };
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let name = format!("pvc-{uid}");
    if p.volumes.get(&ObjectKey::cluster(&name)).is_some() {
        return Ok(Action::await_change());
    }
    let node = p.nodes.get(&ObjectKey::cluster(&node_name));
    let published_root = node.as_ref().and_then(|n| {
        n.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LOCAL_PATH_ROOT))
            .cloned()
    });
    let simulated = node
        .as_ref()
        .and_then(|n| n.metadata.labels.as_ref())
        .and_then(|l| l.get(SIMULATED_NODE_LABEL))
        .is_some_and(|v| v == "true");
    if published_root.is_none() && !simulated {
        // A node with an agent publishes its root just after it registers; a volume made
        // before that would live where no agent cleans it up, so wait for it.
        return Ok(Action::requeue(ROOT_WAIT));
    }
    let root = published_root
        .clone()
        .or_else(|| {
            class
                .parameters
                .as_ref()
                .and_then(|m| m.get("nodePath").cloned())
        })
        .unwrap_or_else(|| DEFAULT_ROOT.to_owned());
    let hostname = node
        .as_ref()
        .and_then(|n| n.metadata.labels.as_ref())
        .and_then(|l| l.get("kubernetes.io/hostname"))
        .cloned()
        .unwrap_or_else(|| node_name.clone());
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let path = format!(
        "{}/pvc-{uid}_{namespace}_{claim_name}",
        root.trim_end_matches('/')
    );
    let finalizers: Vec<&str> = if published_root.is_some() {
        vec![LOCAL_PATH_CLEANUP]
    } else {
        Vec::new()
    };
    let volume: PersistentVolume = match serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "annotations": {PROVISIONED_BY: LOCAL_PATH_PROVISIONER, LOCAL_PATH_NODE: node_name},
            "finalizers": finalizers,
        },
        "spec": {
            "capacity": {"storage": requested(&claim).unwrap_or_else(|| "0".to_owned())},
            "accessModes": spec.access_modes.clone().unwrap_or_default(),
            "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".to_owned()),
            "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".to_owned()),
            "storageClassName": class_name,
            "local": {"path": path},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}
            ]}]}},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": namespace, "name": claim_name, "uid": uid,
            },
        },
    })) {
        Ok(volume) => volume,
        Err(e) => {
            tracing::warn!(error = %e, "building a local-path volume");
            return Ok(Action::await_change());
        }
    };
    match p
        .client
        .api::<PersistentVolume>()
        .create(&PostParams::default(), &volume)
        .await
    {
        Ok(_) => {
            p.recorder.publish_for(
                claim.as_ref(),
                EventDetails::normal("ProvisioningSucceeded", "Provisioning").with_note(format!(
                    "Successfully provisioned volume {name} at {path} on node {node_name}"
                )),
            );
            Ok(Action::await_change())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Action::await_change()),
        Err(source) => Err(ProvisionError { name, source }),
    }
}
