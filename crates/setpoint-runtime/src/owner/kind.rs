//! Owner mapping for controllers' `owns`: from an owned object to the key of the object of one
//! kind that controls it.
//!
//! An owned object names its controller in an ownerReference with `controller: true` (at most
//! one such reference is valid). It maps to the controller's key when that reference's kind
//! and apiVersion *group* match the controller's main kind (any version: an owner written as
//! `apps/v1beta1` is still a Deployment). The key's namespace is the owned object's for a
//! namespaced owner kind and none for a cluster-scoped one — an ownerReference carries no
//! namespace, and owners live in their dependents' namespace or in none.

use std::any::TypeId;

use k8s_openapi::ClusterResourceScope;
use kube::api::ObjectMeta;
use kube::Resource;

use super::controller_ref;
use super::refs::group_of;
use crate::ObjectKey;

/// Whether the owner kind's objects live in namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnerScope {
    /// Namespaced (or of a scope only known at run time): owners share their dependents'
    /// namespace.
    Namespaced,
    /// Cluster-scoped: owner keys have no namespace.
    Cluster,
}

/// The kind whose objects own the objects being mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnerKind {
    /// The kind, e.g. `Deployment`.
    kind: String,
    /// The API group, empty for the core group.
    group: String,
    /// Where its objects live.
    scope: OwnerScope,
}

impl OwnerKind {
    /// The owner kind `K` (the controller's main kind).
    pub(crate) fn of<K>() -> OwnerKind
    where
        K: Resource,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let dt = K::DynamicType::default();
        let scope = if TypeId::of::<K::Scope>() == TypeId::of::<ClusterResourceScope>() {
            OwnerScope::Cluster
        } else {
            OwnerScope::Namespaced
        };
        OwnerKind {
            kind: K::kind(&dt).into_owned(),
            group: K::group(&dt).into_owned(),
            scope,
        }
    }

    /// The key of the controller of the object with metadata `meta`, if it is of this kind.
    pub(crate) fn controller_of(&self, meta: &ObjectMeta) -> Option<ObjectKey> {
        let owner = controller_ref(meta)?;
        if owner.kind != self.kind || group_of(&owner.api_version) != self.group {
            return None;
        }
        Some(ObjectKey {
            namespace: match self.scope {
                OwnerScope::Namespaced => meta.namespace.clone(),
                OwnerScope::Cluster => None,
            },
            name: owner.name.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned_by(refs: &[(&str, &str, &str, Option<bool>)]) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("child".into()),
            owner_references: Some(
                refs.iter()
                    .map(|(api_version, kind, name, controller)| OwnerReference {
                        api_version: (*api_version).into(),
                        kind: (*kind).into(),
                        name: (*name).into(),
                        uid: format!("uid-{name}"),
                        controller: *controller,
                        block_owner_deletion: None,
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn controller_of_should_map_the_controller_reference_of_the_owner_kind() {
        let deployments = OwnerKind::of::<Deployment>();
        let meta = owned_by(&[
            ("apps/v1", "Deployment", "not-controller", None),
            ("apps/v1", "Deployment", "web", Some(true)),
        ]);
        assert_eq!(
            deployments.controller_of(&meta),
            Some(ObjectKey::namespaced("ns", "web"))
        );
    }

    #[test]
    fn controller_of_should_ignore_other_kinds_groups_and_non_controllers() {
        let deployments = OwnerKind::of::<Deployment>();
        let cases = [
            owned_by(&[("apps/v1", "ReplicaSet", "rs", Some(true))]),
            owned_by(&[("example.com/v1", "Deployment", "fake", Some(true))]),
            owned_by(&[("apps/v1", "Deployment", "web", Some(false))]),
            owned_by(&[("apps/v1", "Deployment", "web", None)]),
            ObjectMeta::default(),
        ];
        for meta in cases {
            assert_eq!(deployments.controller_of(&meta), None, "{meta:?}");
        }
    }

    #[test]
    fn controller_of_should_match_any_version_of_the_group() {
        let replicasets = OwnerKind::of::<ReplicaSet>();
        let meta = owned_by(&[("apps/v1beta2", "ReplicaSet", "rs", Some(true))]);
        assert_eq!(
            replicasets.controller_of(&meta),
            Some(ObjectKey::namespaced("ns", "rs"))
        );
    }

    #[test]
    fn controller_of_should_give_cluster_scoped_owners_no_namespace() {
        let namespaces = OwnerKind::of::<Namespace>();
        let meta = owned_by(&[("v1", "Namespace", "team-a", Some(true))]);
        assert_eq!(
            namespaces.controller_of(&meta),
            Some(ObjectKey::cluster("team-a"))
        );
    }
}
