//! A StatefulSet pod's PersistentVolumeClaims: created from the `volumeClaimTemplates` before
//! the pod (an existing claim is reused, never recreated), and their owner references kept
//! as `persistentVolumeClaimRetentionPolicy` says, so the garbage collector deletes them when
//! the policy wants it (as kube-controller-manager does):
//!
//! - `whenDeleted: Delete` — the claim is owned by the StatefulSet, and goes with it;
//! - `whenScaled: Delete` — the claim of a pod being scaled away (ordinal out of range) is
//!   owned by that pod (set before the pod is deleted), and goes with it;
//! - `Retain` — no such reference: the claim outlives both.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Resource;
use serde_json::{json, Value};
use setpoint_runtime::ObjectKey;

use super::error::StatefulSetError;
use super::identity::{claims_for, pod_name};
use super::Context;

/// Whether a retention field says `Delete`.
fn deletes(set: &StatefulSet, scaled: bool) -> bool {
    let policy = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let field = policy.and_then(|p| {
        if scaled {
            p.when_scaled.as_deref()
        } else {
            p.when_deleted.as_deref()
        }
    });
    field == Some("Delete")
}

/// A plain (non-controller) reference to `owner`.
fn reference_to<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// The owner references a claim of `set`'s pod `pod_name` should carry, from the ones it has:
/// other owners kept, the set's and the pod's (any earlier pod of that name) replaced by what
/// the policy wants. `pod` is the live pod, if any; `condemned` whether its ordinal is out of
/// range.
pub(super) fn wanted_references(
    existing: &[OwnerReference],
    set: &StatefulSet,
    pod_name: &str,
    pod: Option<&Pod>,
    condemned: bool,
) -> Vec<OwnerReference> {
    let set_uid = set.metadata.uid.as_deref().unwrap_or_default();
    let mut references: Vec<OwnerReference> = existing
        .iter()
        .filter(|r| r.uid != set_uid && !(r.kind == "Pod" && r.name == pod_name))
        .cloned()
        .collect();
    let scaled_away = condemned && deletes(set, true);
    if scaled_away {
        if let Some(pod) = pod {
            references.push(reference_to(pod));
        }
    } else if deletes(set, false) {
        references.push(reference_to(set));
    }
    references
}

/// Makes sure every claim of `set`'s pod `ordinal` exists and carries the references the
/// retention policy wants. `pod` is the live pod, if any.
pub(super) async fn ensure_claims(
    ctx: &Context,
    set: &StatefulSet,
    ordinal: i64,
    pod: Option<&Pod>,
    condemned: bool,
) -> Result<(), StatefulSetError> {
    let name = pod_name(set, ordinal);
    let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
    let api = ctx
        .client
        .namespaced_api::<PersistentVolumeClaim>(namespace);
    for mut claim in claims_for(set, ordinal) {
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let cached = ctx
            .claims
            .get(&ObjectKey::namespaced(namespace, claim_name.clone()));
        let Some(cached) = cached else {
            let references = wanted_references(&[], set, &name, pod, condemned);
            claim.metadata.owner_references = (!references.is_empty()).then_some(references);
            match api.create(&PostParams::default(), &claim).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(source) => {
                    return Err(StatefulSetError::Claim {
                        claim: claim_name,
                        source,
                    })
                }
            }
            continue;
        };
        let existing = cached.metadata.owner_references.clone().unwrap_or_default();
        let wanted = wanted_references(&existing, set, &name, pod, condemned);
        if wanted == existing {
            continue;
        }
        let references = if wanted.is_empty() {
            Value::Null
        } else {
            json!(wanted)
        };
        let patch = json!({"metadata": {
            "ownerReferences": references,
            "resourceVersion": cached.metadata.resource_version,
        }});
        match api
            .patch(&claim_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(StatefulSetError::Claim {
                    claim: claim_name,
                    source,
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn set(when_deleted: &str, when_scaled: &str) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("set-uid".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                persistent_volume_claim_retention_policy: Some(
                    StatefulSetPersistentVolumeClaimRetentionPolicy {
                        when_deleted: Some(when_deleted.into()),
                        when_scaled: Some(when_scaled.into()),
                    },
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pod(uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn owners(refs: &[OwnerReference]) -> Vec<(String, String)> {
        refs.iter()
            .map(|r| (r.kind.clone(), r.uid.clone()))
            .collect()
    }

    #[test]
    fn retain_retain_should_own_nothing() {
        let refs = wanted_references(
            &[],
            &set("Retain", "Retain"),
            "web-1",
            Some(&pod("p")),
            true,
        );
        assert!(refs.is_empty());
    }

    #[test]
    fn when_deleted_delete_should_be_owned_by_the_set() {
        let s = set("Delete", "Retain");
        let refs = wanted_references(&[], &s, "web-1", Some(&pod("p")), false);
        assert_eq!(owners(&refs), [("StatefulSet".into(), "set-uid".into())]);
        let again = wanted_references(&refs, &s, "web-1", Some(&pod("p")), false);
        assert_eq!(again, refs, "idempotent");
    }

    #[test]
    fn when_scaled_delete_should_pass_a_condemned_claim_to_its_pod_only() {
        let s = set("Delete", "Delete");
        let kept = wanted_references(&[], &s, "web-1", Some(&pod("p")), false);
        let condemned = wanted_references(&kept, &s, "web-1", Some(&pod("p")), true);
        assert_eq!(owners(&condemned), [("Pod".into(), "p".into())]);
        // Scaled back up with a new pod: the old pod's reference goes, the set's returns.
        let back = wanted_references(&condemned, &s, "web-1", Some(&pod("q")), false);
        assert_eq!(owners(&back), [("StatefulSet".into(), "set-uid".into())]);
    }
}
