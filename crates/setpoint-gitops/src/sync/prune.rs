//! Prune: deleting what a Sync applied before and its source no longer holds.
//!
//! The candidates are the previous inventory minus the new one. An object is deleted only if
//! it still exists, still carries this Sync's ownership labels (someone else may have taken
//! it over), and is not annotated `gitops.setpoint.dev/prune: disabled`. Namespaces and CRDs go
//! last, after the objects that may live in them. Deletion propagates in the background, as
//! Flux's does.

use std::collections::BTreeSet;

use serde_json::Value;

use super::apply::{self, dynamic_api};
use super::discovery::Discovery;
use crate::kinds::{Inventory, PRUNE_ANNOTATION, SYNC_NAMESPACE_LABEL, SYNC_NAME_LABEL};
use crate::manifests::ObjectId;

/// What a prune did.
#[derive(Debug, Default)]
pub(crate) struct Pruned {
    /// Deleted.
    pub(crate) deleted: Vec<ObjectId>,
    /// Left alone: annotated, or no longer labelled as this Sync's.
    pub(crate) kept: Vec<ObjectId>,
}

/// Why a prune stopped.
#[derive(Debug, thiserror::Error)]
#[error("pruning {0}: {1}")]
pub(crate) struct PruneError(pub(crate) ObjectId, pub(crate) String);

/// The entries of `old` that are not in `new`, as (id, version), Namespaces and CRDs last.
pub(crate) fn stale(old: &Inventory, new: &Inventory) -> Vec<(ObjectId, String)> {
    let keep: BTreeSet<&str> = new.entries.iter().map(|e| e.id.as_str()).collect();
    let mut stale: Vec<(ObjectId, String)> = old
        .entries
        .iter()
        .filter(|e| !keep.contains(e.id.as_str()))
        .filter_map(|e| ObjectId::from_inventory_id(&e.id).map(|id| (id, e.v.clone())))
        .collect();
    stale.sort_by_key(|(id, _)| (id.is_namespace() || id.is_crd(), id.clone()));
    stale
}

/// Whether a live object may be pruned by the Sync `namespace/name`.
pub(crate) fn prunable(live: &Value, name: &str, namespace: &str) -> bool {
    let label = |key: &str| {
        live.pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
    };
    let disabled = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PRUNE_ANNOTATION))
        .and_then(Value::as_str)
        == Some("disabled");
    label(SYNC_NAME_LABEL) == Some(name)
        && label(SYNC_NAMESPACE_LABEL) == Some(namespace)
        && !disabled
}

/// Deletes the stale objects of the Sync `namespace/name`.
pub(crate) async fn prune(
    client: &kube::Client,
    discovery: &Discovery,
    stale: &[(ObjectId, String)],
    name: &str,
    namespace: &str,
) -> Result<Pruned, PruneError> {
    let mut pruned = Pruned::default();
    for (id, version) in stale {
        // A kind no longer served has no objects left to delete.
        let Ok(served) = discovery
            .resolve(client, &id.group, version, &id.kind)
            .await
        else {
            continue;
        };
        let api = dynamic_api(
            client,
            &served.resource,
            served.namespaced.then_some(id.namespace.as_str()),
        );
        let live = match api.get_opt(&id.name).await {
            Ok(Some(live)) => serde_json::to_value(live).unwrap_or(Value::Null),
            Ok(None) => continue,
            Err(e) => return Err(PruneError(id.clone(), apply::api_message(&e))),
        };
        if !prunable(&live, name, namespace) {
            pruned.kept.push(id.clone());
            continue;
        }
        match apply::delete(client, discovery, id, version).await {
            Ok(true) => pruned.deleted.push(id.clone()),
            Ok(false) => {}
            Err(m) => return Err(PruneError(id.clone(), m)),
        }
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::InventoryEntry;
    use serde_json::json;

    fn inventory(ids: &[&str]) -> Inventory {
        Inventory {
            entries: ids
                .iter()
                .map(|id| InventoryEntry {
                    id: (*id).to_owned(),
                    v: "v1".to_owned(),
                })
                .collect(),
        }
    }

    #[test]
    fn stale_entries_should_put_namespaces_and_crds_last() {
        let old = inventory(&[
            "_prod__Namespace",
            "prod_a__ConfigMap",
            "prod_b__ConfigMap",
            "_x.example.com_apiextensions.k8s.io_CustomResourceDefinition",
        ]);
        let new = inventory(&["prod_a__ConfigMap"]);
        let names: Vec<String> = stale(&old, &new)
            .iter()
            .map(|(id, _)| id.to_string())
            .collect();
        assert_eq!(
            names,
            [
                "ConfigMap/prod/b",
                "Namespace/prod",
                "CustomResourceDefinition/x.example.com"
            ]
        );
    }

    #[test]
    fn only_objects_labelled_for_this_sync_and_not_disabled_should_be_prunable() {
        let mut live = json!({"metadata": {"labels": {
            SYNC_NAME_LABEL: "apps", SYNC_NAMESPACE_LABEL: "flux"}}});
        assert!(prunable(&live, "apps", "flux"));
        assert!(!prunable(&live, "apps", "other"));
        live["metadata"]["annotations"] = json!({PRUNE_ANNOTATION: "disabled"});
        assert!(!prunable(&live, "apps", "flux"));
    }
}
