//! What every namespace holds from the start, as kube-controller-manager provides it: the
//! `default` ServiceAccount (its `serviceaccount` controller, [`service_account`]) and the
//! `kube-root-ca.crt` ConfigMap with the cluster's CA bundle (its `root-ca-cert-publisher`,
//! [`root_ca`]). Each is a controller of namespaces that also watches its object by name, so a
//! new namespace gets it at once and a deleted or changed one is put back. A namespace being
//! deleted gets nothing.

pub(crate) mod root_ca;
pub(crate) mod service_account;

use k8s_openapi::api::core::v1::Namespace;
use kube::Resource;
use setpoint_runtime::ObjectKey;

/// Whether `namespace` is being deleted (nothing may be created in it).
fn terminating(namespace: &Namespace) -> bool {
    namespace.metadata.deletion_timestamp.is_some()
        || namespace
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Terminating")
}

/// The namespace's key for an object named `name` in it, if the object is `wanted`.
fn namespace_of<K: Resource>(object: &K, wanted: &str) -> Option<ObjectKey> {
    let meta = object.meta();
    if meta.name.as_deref() != Some(wanted) {
        return None;
    }
    meta.namespace.clone().map(|name| ObjectKey {
        namespace: None,
        name,
    })
}
