//! The pods a StatefulSet or DaemonSet manages, found as both loops find them: the pods it
//! controls (the cache's index by controller uid) and the orphans its selector matches, then
//! adopted or released through the SDK's `owner::claim`.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::de::DeserializeOwned;
use setpoint_core::LabelSelector;
use setpoint_runtime::{owner, Client, ObjectCache, ObjectKey};

/// The pods `owner` manages after adopting selected orphans and releasing pods it no longer
/// selects, terminating and finished ones included; `by_controller_uid` names the cache index
/// of pods by their controller's uid.
pub(crate) async fn claim_pods<O>(
    client: &Client,
    pods: &ObjectCache<Pod>,
    by_controller_uid: &str,
    owner: &O,
    selector: &LabelSelector,
) -> Result<Vec<Arc<Pod>>, owner::ClaimError>
where
    O: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let meta = owner.meta();
    let uid = meta.uid.as_deref().unwrap_or_default();
    let mut candidates: BTreeMap<ObjectKey, Arc<Pod>> = BTreeMap::new();
    for pod in pods.by_index(by_controller_uid, uid).unwrap_or_default() {
        candidates.insert(ObjectKey::of(pod.as_ref()), pod);
    }
    for pod in pods.list_selected(meta.namespace.as_deref(), selector) {
        if owner::controller_ref(&pod.metadata).is_none() {
            candidates.insert(ObjectKey::of(pod.as_ref()), pod);
        }
    }
    owner::claim(client, owner, selector, candidates.into_values(), |_| {}).await
}
