//! Which pods a ReplicaSet manages, and making the ownerReferences say so — the SDK's claim
//! step ([`setpoint_runtime::owner::claim`]) over the active pods it controls (by the
//! controller-UID index) and the active orphans of its namespace it selects: the ones it
//! controls and still selects are its own, a selected orphan is adopted, one it controls but
//! no longer selects is released, another controller's is never touched.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use setpoint_core::LabelSelector;
use setpoint_runtime::{owner, ObjectKey};

use super::error::ReplicaSetError;
use super::kind::Replicated;
use super::pods::is_active;
use super::watch::BY_CONTROLLER_UID;
use super::Context;

/// The active pods `rs` manages after adopting and releasing: those it controls (by the
/// controller-UID index) and the orphans of its namespace it selects.
pub(super) async fn claim_pods<K: Replicated>(
    ctx: &Context,
    rs: &K,
    selector: &LabelSelector,
) -> Result<Vec<Arc<Pod>>, ReplicaSetError> {
    let uid = rs.meta().uid.as_deref().unwrap_or_default();
    let mut candidates: BTreeMap<ObjectKey, Arc<Pod>> = BTreeMap::new();
    for pod in ctx.pods.by_index(BY_CONTROLLER_UID, uid)? {
        candidates.insert(ObjectKey::of(pod.as_ref()), pod);
    }
    let namespace = rs.meta().namespace.as_deref();
    for pod in ctx.pods.list_selected(namespace, selector) {
        if owner::controller_ref(&pod.metadata).is_none() {
            candidates.insert(ObjectKey::of(pod.as_ref()), pod);
        }
    }
    let active = candidates.into_values().filter(|p| is_active(p));
    Ok(owner::claim(&ctx.client, rs, selector, active, |_| {}).await?)
}
