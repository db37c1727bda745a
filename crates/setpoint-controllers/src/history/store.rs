//! The revisions of one owner (a StatefulSet or a DaemonSet) as stored: claimed from the
//! cache, the update revision found or created, and the history truncated.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;
use setpoint_core::LabelSelector;
use setpoint_runtime::owner::{self, controller_ref_to, ClaimError};
use setpoint_runtime::{Client, ObjectCache, ObjectKey};

use super::revision::Revision;

/// How many hash collisions are tried before giving up for this sync.
const MAX_COLLISIONS: i32 = 32;

/// Why reading or writing an owner's history failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HistoryError {
    /// Orphaned revisions could not be adopted, or unselected ones released.
    #[error("claiming controller revisions")]
    Claim(#[from] ClaimError),
    /// A revision could not be created, read back or renumbered.
    #[error("writing controller revision {name}")]
    Write {
        /// The revision's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Every hash tried was taken by a revision with other data.
    #[error("no free revision name for {owner} after {MAX_COLLISIONS} collisions")]
    Collisions {
        /// `namespace/name` of the owner.
        owner: String,
    },
}

/// A workload that keeps a template history.
pub(crate) trait Owner:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
{
    /// Its pod template.
    fn template(&self) -> PodTemplateSpec;
    /// `status.collisionCount`.
    fn collision_count(&self) -> Option<i32>;
    /// `spec.revisionHistoryLimit` (10 when unset).
    fn history_limit(&self) -> usize;
}

impl Owner for StatefulSet {
    fn template(&self) -> PodTemplateSpec {
        self.spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default()
    }
    fn collision_count(&self) -> Option<i32> {
        self.status.as_ref().and_then(|s| s.collision_count)
    }
    fn history_limit(&self) -> usize {
        let limit = self.spec.as_ref().and_then(|s| s.revision_history_limit);
        usize::try_from(limit.unwrap_or(10)).unwrap_or(0)
    }
}

impl Owner for DaemonSet {
    fn template(&self) -> PodTemplateSpec {
        self.spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default()
    }
    fn collision_count(&self) -> Option<i32> {
        self.status.as_ref().and_then(|s| s.collision_count)
    }
    fn history_limit(&self) -> usize {
        let limit = self.spec.as_ref().and_then(|s| s.revision_history_limit);
        usize::try_from(limit.unwrap_or(10)).unwrap_or(0)
    }
}

/// The revisions `owner` controls after adopting selected orphans and releasing the ones it
/// no longer selects, oldest (lowest number) first.
pub(crate) async fn claim_revisions<O: Owner>(
    client: &Client,
    cache: &ObjectCache<ControllerRevision>,
    owner: &O,
    selector: &LabelSelector,
) -> Result<Vec<Arc<ControllerRevision>>, HistoryError> {
    let namespace = owner.meta().namespace.as_deref().unwrap_or_default();
    let uid = owner.meta().uid.as_deref();
    let candidates = cache.list_namespace(namespace).into_iter().filter(|r| {
        match owner::controller_ref(&r.metadata) {
            Some(reference) => Some(reference.uid.as_str()) == uid,
            None => true,
        }
    });
    let mut claimed = owner::claim(client, owner, selector, candidates, |_| {}).await?;
    claimed.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    Ok(claimed)
}

/// The revision of `owner`'s current template, and the collision count it was named under:
/// the newest equal revision if it is the latest, an older equal one renumbered to the next
/// number, or a new one (bumping the collision count while its name is taken by other data).
/// `revisions` are the claimed ones, oldest first.
pub(crate) async fn update_revision<O: Owner>(
    client: &Client,
    owner: &O,
    revisions: &[Arc<ControllerRevision>],
) -> Result<(ControllerRevision, Option<i32>), HistoryError> {
    let template = owner.template();
    let mut collision_count = owner.collision_count();
    let next = revisions.last().map_or(1, |r| r.revision + 1);
    let wanted = Revision::of(&template, collision_count);
    let meta = owner.meta();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let api = client.namespaced_api::<ControllerRevision>(namespace);
    if let Some(equal) = revisions.iter().rev().find(|r| wanted.equals(r)) {
        let is_latest = revisions.last().is_some_and(|l| Arc::ptr_eq(l, equal));
        if is_latest {
            return Ok((equal.as_ref().clone(), collision_count));
        }
        // Rolling back to an older template: it becomes the newest revision again.
        let name = equal.metadata.name.clone().unwrap_or_default();
        let patch = json!({"revision": next});
        let renumbered = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| HistoryError::Write {
                name: name.clone(),
                source,
            })?;
        return Ok((renumbered, collision_count));
    }
    let owner_name = meta.name.as_deref().unwrap_or_default();
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    for _ in 0..MAX_COLLISIONS {
        let revision = Revision::of(&template, collision_count);
        let mut object = revision.to_object(owner_name, meta.namespace.as_deref(), labels, next);
        object.metadata.owner_references = Some(vec![controller_ref_to(owner)]);
        let name = revision.name(owner_name);
        match api.create(&PostParams::default(), &object).await {
            Ok(created) => return Ok((created, collision_count)),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let existing = api.get(&name).await.map_err(|source| HistoryError::Write {
                    name: name.clone(),
                    source,
                })?;
                if revision.equals(&existing) && owner::is_controlled_by(&existing.metadata, meta) {
                    return Ok((existing, collision_count));
                }
                collision_count = Some(collision_count.unwrap_or(0).saturating_add(1));
            }
            Err(source) => return Err(HistoryError::Write { name, source }),
        }
    }
    Err(HistoryError::Collisions {
        owner: ObjectKey::of(owner).to_string(),
    })
}

/// Deletes the oldest of `revisions` beyond `limit`, sparing every revision named in `live`
/// (the current and update revisions and those live pods run). Deletes are conditional on
/// the revision's UID; one already gone is fine.
pub(crate) async fn truncate(
    client: &Client,
    revisions: &[Arc<ControllerRevision>],
    live: &HashSet<String>,
    limit: usize,
) -> Result<(), HistoryError> {
    let history: Vec<_> = revisions
        .iter()
        .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    let surplus = history.len().saturating_sub(limit);
    for revision in history.into_iter().take(surplus) {
        let name = revision.metadata.name.clone().unwrap_or_default();
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: revision.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match client
            .namespaced_api::<ControllerRevision>(namespace)
            .delete(&name, &params)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(source) => return Err(HistoryError::Write { name, source }),
        }
    }
    Ok(())
}
