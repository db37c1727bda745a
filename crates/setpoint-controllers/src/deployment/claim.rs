//! Which ReplicaSets a Deployment manages, and making the ownerReferences say so — as the
//! ReplicaSet loop claims pods: those it controls and still selects are its own; an orphan of
//! its namespace it selects is adopted (only if the Deployment is not being deleted and a live
//! read confirms the cached Deployment is still the stored one); one it controls but no longer
//! selects is released. ReplicaSets another controller controls are never touched. Patches
//! carry the cached `resourceVersion`, so one made from a stale cache fails with a conflict
//! (and the sync is retried) instead of overwriting a newer write.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use setpoint_core::LabelSelector;
use setpoint_runtime::ObjectKey;

use super::error::DeploymentError;
use super::replicasets::{controller_ref, controller_ref_to};
use super::Context;

/// What to do with one ReplicaSet of the Deployment's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    /// Controlled and selected: the Deployment's.
    Keep,
    /// An orphan the Deployment selects: adopt it.
    Adopt,
    /// Controlled but no longer selected: release it.
    Release,
    /// Not the Deployment's business.
    Ignore,
}

/// What `d` (selecting with `selector`) does with `rs`.
pub(super) fn claim(d: &Deployment, selector: &LabelSelector, rs: &ReplicaSet) -> Claim {
    let deleting = d.metadata.deletion_timestamp.is_some();
    let empty = BTreeMap::new();
    let selected = selector.matches(rs.metadata.labels.as_ref().unwrap_or(&empty));
    match controller_ref(&rs.metadata) {
        Some(owner) if Some(&owner.uid) == d.metadata.uid.as_ref() => {
            if selected {
                Claim::Keep
            } else if deleting {
                Claim::Ignore
            } else {
                Claim::Release
            }
        }
        Some(_) => Claim::Ignore,
        None if deleting || !selected || rs.metadata.deletion_timestamp.is_some() => Claim::Ignore,
        None if rs.metadata.namespace != d.metadata.namespace => Claim::Ignore,
        None => Claim::Adopt,
    }
}

/// The ReplicaSets `d` manages after adopting and releasing (copies of the cached ones, or
/// the adopted ones as the server returned them).
pub(super) async fn claim_replicasets(
    ctx: &Context,
    d: &Deployment,
    selector: &LabelSelector,
) -> Result<Vec<ReplicaSet>, DeploymentError> {
    let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
    let mut claimed = Vec::new();
    let mut may_adopt: Option<bool> = None;
    for rs in ctx.replicasets.list_namespace(namespace) {
        match claim(d, selector, &rs) {
            Claim::Keep => claimed.push(rs.as_ref().clone()),
            Claim::Ignore => {}
            Claim::Release => {
                set_owners(ctx, d, &rs, Ownership::Release).await?;
            }
            Claim::Adopt => {
                let allowed = match may_adopt {
                    Some(allowed) => allowed,
                    None => *may_adopt.insert(recheck(ctx, d).await?),
                };
                if allowed {
                    if let Some(adopted) = set_owners(ctx, d, &rs, Ownership::Adopt).await? {
                        claimed.push(adopted);
                    }
                }
            }
        }
    }
    Ok(claimed)
}

/// Whether the stored Deployment is the cached one (same UID) and not being deleted.
async fn recheck(ctx: &Context, d: &Deployment) -> Result<bool, DeploymentError> {
    let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
    let name = d.metadata.name.as_deref().unwrap_or_default();
    match ctx
        .client
        .namespaced_api::<Deployment>(namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(live)) => {
            Ok(live.metadata.uid == d.metadata.uid && live.metadata.deletion_timestamp.is_none())
        }
        Ok(None) => Ok(false),
        Err(source) => Err(DeploymentError::Recheck {
            deployment: ObjectKey::of(d).to_string(),
            source,
        }),
    }
}

/// Which way an ownership patch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ownership {
    Adopt,
    Release,
}

/// Adds or removes `d`'s controller reference on `rs`; the ReplicaSet as written, `None` if it
/// is gone (or, releasing, no longer the cached one).
async fn set_owners(
    ctx: &Context,
    d: &Deployment,
    rs: &ReplicaSet,
    ownership: Ownership,
) -> Result<Option<ReplicaSet>, DeploymentError> {
    let mut references: Vec<_> = rs
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| Some(&r.uid) != d.metadata.uid.as_ref())
        .cloned()
        .collect();
    if ownership == Ownership::Adopt {
        references.push(controller_ref_to(d));
    }
    let references = if references.is_empty() {
        serde_json::Value::Null
    } else {
        json!(references)
    };
    let patch = json!({
        "metadata": {
            "ownerReferences": references,
            "resourceVersion": rs.metadata.resource_version,
        }
    });
    let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
    let name = rs.metadata.name.as_deref().unwrap_or_default();
    let result = ctx
        .client
        .namespaced_api::<ReplicaSet>(namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    let key = ObjectKey::of(d);
    match result {
        Ok(written) => {
            tracing::info!(deployment = %key, replicaset = name, ?ownership, "changed ownership");
            ctx.expect_written(&key, &written);
            Ok(Some(written))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 422 && ownership == Ownership::Release => Ok(None),
        Err(source) => Err(DeploymentError::ReplicaSet {
            action: match ownership {
                Ownership::Adopt => "adopting",
                Ownership::Release => "releasing",
            },
            deployment: key.to_string(),
            replicaset: name.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use k8s_openapi::jiff::Timestamp;

    fn deployment(uid: &str) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn labelled(owner: Option<&str>, app: &str) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("ns".into()),
                labels: Some([("app".to_owned(), app.to_owned())].into()),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "Deployment".into(),
                        name: "x".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn claim_should_keep_adopt_release_or_ignore() {
        let s = LabelSelector::parse("app=web").expect("valid");
        let d = deployment("u1");
        assert_eq!(claim(&d, &s, &labelled(Some("u1"), "web")), Claim::Keep);
        assert_eq!(claim(&d, &s, &labelled(Some("u1"), "db")), Claim::Release);
        assert_eq!(claim(&d, &s, &labelled(None, "web")), Claim::Adopt);
        assert_eq!(claim(&d, &s, &labelled(None, "db")), Claim::Ignore);
        assert_eq!(claim(&d, &s, &labelled(Some("u2"), "web")), Claim::Ignore);
    }

    #[test]
    fn a_deleting_deployment_should_neither_adopt_nor_release() {
        let s = LabelSelector::parse("app=web").expect("valid");
        let mut d = deployment("u1");
        d.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert_eq!(claim(&d, &s, &labelled(None, "web")), Claim::Ignore);
        assert_eq!(claim(&d, &s, &labelled(Some("u1"), "db")), Claim::Ignore);
        assert_eq!(claim(&d, &s, &labelled(Some("u1"), "web")), Claim::Keep);
    }
}
