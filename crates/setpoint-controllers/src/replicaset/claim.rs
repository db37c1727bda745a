//! Which pods a ReplicaSet manages, and making the ownerReferences say so: the active pods it
//! controls and still selects are its own; an active orphan it selects is adopted (an
//! ownerReference with `controller: true` patched on, only if the ReplicaSet is not being
//! deleted and a live read confirms the cached ReplicaSet is still the one stored); a pod it
//! controls but no longer selects is released (its reference removed). Pods controlled by
//! anything else are never touched. Patches carry the cached `resourceVersion`, so one made
//! from a stale cache fails with a conflict (and is retried) instead of overwriting a newer
//! write.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use setpoint_core::LabelSelector;
use setpoint_runtime::ObjectKey;

use super::error::ReplicaSetError;
use super::pods::{controller_ref, controller_ref_to, is_active};
use super::watch::BY_CONTROLLER_UID;
use super::Context;

/// What to do with one candidate pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    /// Controlled and selected: the ReplicaSet's.
    Keep,
    /// An orphan the ReplicaSet selects: adopt it.
    Adopt,
    /// Controlled but no longer selected: release it.
    Release,
    /// Not the ReplicaSet's business (another controller's, not selected, or a write that must
    /// wait: nothing is adopted or released by a ReplicaSet being deleted).
    Ignore,
}

/// What `rs` (selecting with `selector`) does with `pod`.
pub(super) fn claim(rs: &ReplicaSet, selector: &LabelSelector, pod: &Pod) -> Claim {
    let rs_deleting = rs.metadata.deletion_timestamp.is_some();
    let empty = BTreeMap::new();
    let selected = selector.matches(pod.metadata.labels.as_ref().unwrap_or(&empty));
    match controller_ref(pod) {
        Some(owner) if Some(&owner.uid) == rs.metadata.uid.as_ref() => {
            if selected {
                Claim::Keep
            } else if rs_deleting {
                Claim::Ignore
            } else {
                Claim::Release
            }
        }
        Some(_) => Claim::Ignore,
        None if rs_deleting || !selected || pod.metadata.deletion_timestamp.is_some() => {
            Claim::Ignore
        }
        None if pod.metadata.namespace != rs.metadata.namespace => Claim::Ignore,
        None => Claim::Adopt,
    }
}

/// The active pods `rs` manages after adopting and releasing: those it controls (by the
/// controller-UID index) and the orphans of its namespace it selects.
pub(super) async fn claim_pods(
    ctx: &Context,
    rs: &ReplicaSet,
    selector: &LabelSelector,
) -> Result<Vec<Arc<Pod>>, ReplicaSetError> {
    let uid = rs.metadata.uid.as_deref().unwrap_or_default();
    let mut candidates: BTreeMap<ObjectKey, Arc<Pod>> = BTreeMap::new();
    for pod in ctx.pods.by_index(BY_CONTROLLER_UID, uid)? {
        candidates.insert(ObjectKey::of(pod.as_ref()), pod);
    }
    let namespace = rs.metadata.namespace.as_deref();
    for pod in ctx.pods.list_selected(namespace, selector) {
        if controller_ref(&pod).is_none() {
            candidates.insert(ObjectKey::of(pod.as_ref()), pod);
        }
    }

    let mut claimed = Vec::new();
    // Whether a live read confirmed the ReplicaSet may adopt; read at most once per sync.
    let mut may_adopt: Option<bool> = None;
    for pod in candidates.into_values().filter(|p| is_active(p)) {
        match claim(rs, selector, &pod) {
            Claim::Keep => claimed.push(pod),
            Claim::Ignore => {}
            Claim::Release => release(ctx, rs, &pod).await?,
            Claim::Adopt => {
                let allowed = match may_adopt {
                    Some(allowed) => allowed,
                    None => *may_adopt.insert(recheck(ctx, rs).await?),
                };
                if allowed {
                    if let Some(adopted) = adopt(ctx, rs, &pod).await? {
                        claimed.push(Arc::new(adopted));
                    }
                }
            }
        }
    }
    Ok(claimed)
}

/// Whether the stored ReplicaSet is the cached one (same UID) and not being deleted — checked
/// live, because a cache may still hold a ReplicaSet already deleted (and perhaps re-created).
async fn recheck(ctx: &Context, rs: &ReplicaSet) -> Result<bool, ReplicaSetError> {
    let (namespace, name) = namespace_and_name(rs);
    let api = ctx.client.namespaced_api::<ReplicaSet>(namespace);
    match api.get_opt(name).await {
        Ok(Some(live)) => {
            Ok(live.metadata.uid == rs.metadata.uid && live.metadata.deletion_timestamp.is_none())
        }
        Ok(None) => Ok(false),
        Err(source) => Err(ReplicaSetError::Recheck {
            replicaset: ObjectKey::of(rs).to_string(),
            source,
        }),
    }
}

/// Patches `rs` on as `pod`'s controller. `None` if the pod is gone.
async fn adopt(ctx: &Context, rs: &ReplicaSet, pod: &Pod) -> Result<Option<Pod>, ReplicaSetError> {
    let mut references = pod.metadata.owner_references.clone().unwrap_or_default();
    references.push(controller_ref_to(rs));
    let result = patch_owners(ctx, pod, json!(references)).await;
    match result {
        Ok(adopted) => {
            tracing::info!(replicaset = %ObjectKey::of(rs), pod = %ObjectKey::of(pod), "adopted pod");
            Ok(Some(adopted))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(source) => Err(ownership_error("adopting", rs, pod, source)),
    }
}

/// Removes `rs`'s ownerReference from `pod`.
async fn release(ctx: &Context, rs: &ReplicaSet, pod: &Pod) -> Result<(), ReplicaSetError> {
    let references: Vec<_> = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| Some(&r.uid) != rs.metadata.uid.as_ref())
        .cloned()
        .collect();
    let references = if references.is_empty() {
        serde_json::Value::Null
    } else {
        json!(references)
    };
    match patch_owners(ctx, pod, references).await {
        Ok(_) => {
            tracing::info!(replicaset = %ObjectKey::of(rs), pod = %ObjectKey::of(pod), "released pod");
            Ok(())
        }
        // Gone, or no longer the pod that was cached: nothing of ours to release.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 422 => Ok(()),
        Err(source) => Err(ownership_error("releasing", rs, pod, source)),
    }
}

/// Sets `pod`'s ownerReferences, conditional on its cached resourceVersion.
async fn patch_owners(
    ctx: &Context,
    pod: &Pod,
    references: serde_json::Value,
) -> Result<Pod, kube::Error> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let patch = json!({
        "metadata": {
            "ownerReferences": references,
            "resourceVersion": pod.metadata.resource_version,
        }
    });
    ctx.client
        .namespaced_api::<Pod>(namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn ownership_error(
    action: &'static str,
    rs: &ReplicaSet,
    pod: &Pod,
    source: kube::Error,
) -> ReplicaSetError {
    ReplicaSetError::Ownership {
        action,
        replicaset: ObjectKey::of(rs).to_string(),
        pod: pod.metadata.name.clone().unwrap_or_default(),
        source,
    }
}

/// The ReplicaSet's namespace and name.
pub(super) fn namespace_and_name(rs: &ReplicaSet) -> (&str, &str) {
    (
        rs.metadata.namespace.as_deref().unwrap_or_default(),
        rs.metadata.name.as_deref().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::pods::testing::{base, pod};
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

    fn rs(uid: &str) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn labelled(owner_uid: Option<&str>, app: &str) -> Pod {
        let mut p = pod("p", "Pending", 0);
        p.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        p.metadata.owner_references = owner_uid.map(|uid| {
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "x".into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
        p
    }

    #[test]
    fn claim_should_keep_adopt_release_or_ignore() {
        let selector = LabelSelector::parse("app=web").expect("valid");
        let ours = rs("u1");
        assert_eq!(
            claim(&ours, &selector, &labelled(Some("u1"), "web")),
            Claim::Keep
        );
        assert_eq!(
            claim(&ours, &selector, &labelled(Some("u1"), "db")),
            Claim::Release
        );
        assert_eq!(
            claim(&ours, &selector, &labelled(None, "web")),
            Claim::Adopt
        );
        assert_eq!(
            claim(&ours, &selector, &labelled(None, "db")),
            Claim::Ignore
        );
        assert_eq!(
            claim(&ours, &selector, &labelled(Some("other"), "web")),
            Claim::Ignore,
            "another controller's pod is never taken"
        );
    }

    #[test]
    fn a_deleting_replicaset_should_neither_adopt_nor_release() {
        let selector = LabelSelector::parse("app=web").expect("valid");
        let mut deleting = rs("u1");
        deleting.metadata.deletion_timestamp = Some(Time(base()));
        assert_eq!(
            claim(&deleting, &selector, &labelled(None, "web")),
            Claim::Ignore
        );
        assert_eq!(
            claim(&deleting, &selector, &labelled(Some("u1"), "db")),
            Claim::Ignore
        );
        assert_eq!(
            claim(&deleting, &selector, &labelled(Some("u1"), "web")),
            Claim::Keep
        );
    }

    #[test]
    fn a_terminating_orphan_should_not_be_adopted() {
        let selector = LabelSelector::parse("app=web").expect("valid");
        let mut terminating = labelled(None, "web");
        terminating.metadata.deletion_timestamp = Some(Time(base()));
        assert_eq!(claim(&rs("u1"), &selector, &terminating), Claim::Ignore);
    }
}
