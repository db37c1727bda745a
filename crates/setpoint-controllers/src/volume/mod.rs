//! PersistentVolumes and their claims (kube-controller-manager's `persistentvolume-binder`,
//! `pvc-protection` and `pv-protection`, and a local-path provisioner in the manner of
//! rancher/local-path-provisioner):
//! - [`binder`]: binds each claim to the smallest matching volume (capacity, access modes,
//!   class, selector, volume mode; a volume pre-bound through `claimRef` or a claim through
//!   `volumeName` first), keeps both sides' phases, gives class-less claims the default
//!   StorageClass, and reclaims a volume whose claim is gone (`Retain`: `Released`;
//!   `Delete`: the volume is deleted, its data removed by the node's agent first);
//! - [`provisioner`]: makes a `local` volume under the chosen node's directory for a claim of
//!   a `setpoint.dev/local-path` class, once the scheduler has chosen that node
//!   (`volume.kubernetes.io/selected-node`, as `WaitForFirstConsumer` classes do);
//! - [`protection`]: the `kubernetes.io/pvc-protection` finalizer (a claim stays while a pod
//!   uses it) and `kubernetes.io/pv-protection` (a volume stays while bound).
//!
//! Design: `docs/design/volumes.md`.

pub(crate) mod binder;
mod matching;
pub(crate) mod protection;
pub(crate) mod provisioner;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use setpoint_runtime::ObjectCache;

/// The provisioner name of Setpoint's local-path StorageClasses.
pub const LOCAL_PATH_PROVISIONER: &str = "setpoint.dev/local-path";
/// The annotation marking a StorageClass the default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// On a claim: the binding is complete (kube's `pv.kubernetes.io/bind-completed`).
pub(crate) const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a claim or volume: the controller made the binding (not the user).
pub(crate) const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a volume: who provisioned it.
pub(crate) const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// On a local-path volume: the node whose agent created its directory (and removes it).
pub(crate) const LOCAL_PATH_NODE: &str = "setpoint.dev/local-path";
/// On a Node: the directory under which its agent keeps local-path volumes.
pub const LOCAL_PATH_ROOT: &str = "setpoint.dev/local-path-root";
/// The finalizer on a local-path volume that its node's agent removes once the volume's
/// directory is deleted.
pub const LOCAL_PATH_CLEANUP: &str = "setpoint.dev/local-path-cleanup";

/// The claim's storage request, as written.
pub(crate) fn requested(claim: &PersistentVolumeClaim) -> Option<String> {
    claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

/// The name of the default StorageClass (the newest of several, as Kubernetes picks).
pub(crate) fn default_class(classes: &ObjectCache<StorageClass>) -> Option<String> {
    classes
        .list()
        .into_iter()
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true")
        })
        .max_by(|a, b| {
            a.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        })
        .and_then(|c| c.metadata.name.clone())
}
