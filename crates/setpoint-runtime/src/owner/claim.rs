//! The claim step of a controller that owns the objects its selector matches (a ReplicaSet its
//! pods, a Deployment its ReplicaSets): each candidate is kept, adopted, released or ignored as
//! [`decide`] says, and the ownerReferences are patched to match.
//!
//! - An orphan is adopted only if a live read (made at most once per claim, and only when
//!   something is to be adopted) confirms the cached owner is still the stored one — same UID,
//!   not being deleted — because a cache may still hold an owner already deleted, perhaps
//!   re-created under the same name.
//! - Every patch is a JSON merge patch of `metadata.ownerReferences` that carries the
//!   candidate's cached `resourceVersion`: a patch made from a stale cache fails with a
//!   conflict (and the caller's sync is retried) instead of overwriting a newer write.
//! - A candidate that is gone (404) is skipped; a release the server refuses as invalid (422:
//!   the candidate is no longer the one cached) is skipped too. Any other API error ends the
//!   claim with a [`ClaimError`].

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Patch, PatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use setpoint_core::LabelSelector;

use super::refs::{controller_ref_to, decide, ClaimDecision};
use crate::{Client, ObjectKey};

/// Why a claim failed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The live re-read of the owner before adopting failed.
    #[error("re-reading {kind} {owner} before adopting")]
    Recheck {
        /// The owner's kind.
        kind: String,
        /// `namespace/name` of the owner.
        owner: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// An orphan could not be adopted, or an object no longer selected released.
    #[error("{action} {kind} {object} for {owner}")]
    Patch {
        /// "adopting" or "releasing".
        action: &'static str,
        /// The candidate's kind.
        kind: String,
        /// The candidate's name.
        object: String,
        /// `namespace/name` of the owner.
        owner: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The candidates `owner` (selecting with `selector`) manages after adopting and releasing:
/// the ones it controls and still selects, as given, and the adopted ones as the server
/// returned them, in the candidates' order. `on_written` sees every object a patch wrote
/// (adopted or released), right after the write. Not cancel-safe: a cancelled claim may have
/// patched some candidates.
pub async fn claim<O, K>(
    client: &Client,
    owner: &O,
    selector: &LabelSelector,
    candidates: impl IntoIterator<Item = Arc<K>>,
    mut on_written: impl FnMut(&K),
) -> Result<Vec<Arc<K>>, ClaimError>
where
    O: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let mut claimed = Vec::new();
    // Whether a live read confirmed the owner may adopt; read at most once per claim.
    let mut may_adopt: Option<bool> = None;
    for candidate in candidates {
        let direction = match decide(owner.meta(), selector, candidate.meta()) {
            ClaimDecision::Keep => {
                claimed.push(candidate);
                continue;
            }
            ClaimDecision::Ignore => continue,
            ClaimDecision::Release => Direction::Release,
            ClaimDecision::Adopt => {
                let allowed = match may_adopt {
                    Some(allowed) => allowed,
                    None => *may_adopt.insert(recheck(client, owner).await?),
                };
                if !allowed {
                    continue;
                }
                Direction::Adopt
            }
        };
        if let Some(written) = set_owners(client, owner, candidate.as_ref(), direction).await? {
            on_written(&written);
            if direction == Direction::Adopt {
                claimed.push(Arc::new(written));
            }
        }
    }
    Ok(claimed)
}

/// Whether the stored owner is the cached one (same UID) and not being deleted.
async fn recheck<O>(client: &Client, owner: &O) -> Result<bool, ClaimError>
where
    O: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let meta = owner.meta();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    match client.namespaced_api::<O>(namespace).get_opt(name).await {
        Ok(Some(live)) => {
            let live = live.meta();
            Ok(live.uid == meta.uid && live.deletion_timestamp.is_none())
        }
        Ok(None) => Ok(false),
        Err(source) => Err(ClaimError::Recheck {
            kind: O::kind(&()).into_owned(),
            owner: ObjectKey::of(owner).to_string(),
            source,
        }),
    }
}

/// Which way an ownership patch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Adopt,
    Release,
}

/// Adds or removes `owner`'s controller reference on `object` (any other reference to the
/// owner is dropped either way: an object names each owner once). The object as written;
/// `None` if it is gone (or, releasing, no longer the cached one).
async fn set_owners<O, K>(
    client: &Client,
    owner: &O,
    object: &K,
    direction: Direction,
) -> Result<Option<K>, ClaimError>
where
    O: Resource<DynamicType = ()>,
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let owner_meta = owner.meta();
    let meta = object.meta();
    let mut references: Vec<_> = meta
        .owner_references
        .iter()
        .flatten()
        .filter(|r| Some(&r.uid) != owner_meta.uid.as_ref())
        .cloned()
        .collect();
    if direction == Direction::Adopt {
        references.push(controller_ref_to(owner));
    }
    let references = if references.is_empty() {
        Value::Null
    } else {
        json!(references)
    };
    let patch = json!({
        "metadata": {
            "ownerReferences": references,
            "resourceVersion": meta.resource_version,
        }
    });
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    let result = client
        .namespaced_api::<K>(namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    let owner_key = ObjectKey::of(owner);
    let kind = K::kind(&());
    match result {
        Ok(written) => {
            tracing::info!(owner = %owner_key, %kind, object = name, ?direction, "changed ownership");
            Ok(Some(written))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 422 && direction == Direction::Release => Ok(None),
        Err(source) => Err(ClaimError::Patch {
            action: match direction {
                Direction::Adopt => "adopting",
                Direction::Release => "releasing",
            },
            kind: kind.into_owned(),
            object: name.to_owned(),
            owner: owner_key.to_string(),
            source,
        }),
    }
}
