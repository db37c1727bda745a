//! core/v1 PersistentVolume (cluster-scoped): a piece of storage. Defaults as kube-apiserver's:
//! reclaim policy `Retain`, volume mode `Filesystem`, a new volume `Pending`. It needs a
//! capacity with `storage`, at least one access mode and exactly one volume source, which
//! never changes. The `status` subresource (the binder loop that moves phases is not part of
//! Setpoint yet), and the `kubectl get pv` row.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::{default, object_at, set_status};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{access_modes, object_meta, one_of, quantities, required};
use crate::registry::volumes::{
    access_modes_string, attributes_class, pending_volume_status, VOLUME_MODES,
};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        short_names: &["pv"],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(PersistentVolumes), |g| vec![status(g)])]
}

/// The volume sources a persistent volume may name (exactly one).
const SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];

#[derive(Debug)]
struct PersistentVolumes;

#[async_trait]
impl Strategy for PersistentVolumes {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<PersistentVolume>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<PersistentVolume>()
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            default(spec, "volumeMode", json!("Filesystem"));
        }
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, pending_volume_status());
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        required(object, "/spec/capacity", &mut causes);
        if spec["capacity"].as_object().is_some_and(|c| !c.is_empty()) {
            if spec["capacity"].get("storage").is_none() || spec["capacity"].as_object().is_some_and(|c| c.len() > 1) {
                causes.push(Cause::not_supported("spec.capacity", &spec["capacity"], &["storage"]));
            }
            quantities(&spec["capacity"], "spec.capacity", &mut causes);
        }
        access_modes(object, "/spec/accessModes", &mut causes);
        one_of(object, "/spec/persistentVolumeReclaimPolicy", RECLAIM_POLICIES, &mut causes);
        one_of(object, "/spec/volumeMode", VOLUME_MODES, &mut causes);
        let sources = SOURCES.iter().filter(|s| !spec[**s].is_null()).count();
        if sources == 0 {
            causes.push(Cause::new(
                "FieldValueRequired",
                "spec",
                "spec: Required value: must specify a volume type",
            ));
        } else if sources > 1 {
            causes.push(Cause::forbidden("spec", "may not specify more than 1 volume type"));
        }
        if let Some(old) = old {
            if SOURCES.iter().any(|s| spec[*s] != old["spec"][*s]) {
                causes.push(Cause::forbidden(
                    "spec.persistentvolumesource",
                    "spec.persistentvolumesource is immutable after creation",
                ));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Capacity", 0),
            Column::new("Access Modes", 0),
            Column::new("Reclaim Policy", 0),
            Column::new("Status", 0),
            Column::new("Claim", 0),
            Column::new("StorageClass", 0),
            Column::new("VolumeAttributesClass", 0),
            Column::new("Reason", 0),
            Column::new("Age", 0),
            Column::new("VolumeMode", 1),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let (spec, status) = (&o["spec"], &o["status"]);
        let claim = &spec["claimRef"];
        let claim = if claim.is_null() {
            String::new()
        } else {
            format!(
                "{}/{}",
                claim["namespace"].as_str().unwrap_or_default(),
                claim["name"].as_str().unwrap_or_default()
            )
        };
        let phase = if o["metadata"]["deletionTimestamp"].is_null() {
            status["phase"].as_str().unwrap_or_default()
        } else {
            "Terminating"
        };
        let text = |v: &Value| json!(v.as_str().unwrap_or_default());
        vec![
            name_cell(o),
            text(&spec["capacity"]["storage"]),
            json!(access_modes_string(&spec["accessModes"])),
            text(&spec["persistentVolumeReclaimPolicy"]),
            json!(phase),
            json!(claim),
            text(&spec["storageClassName"]),
            attributes_class(spec),
            text(&status["reason"]),
            age_cell(o, now),
            text(&spec["volumeMode"]),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(spec: Value) -> Vec<String> {
        let o = json!({"metadata": {"name": "v"}, "spec": spec});
        futures::executor::block_on(PersistentVolumes.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn defaults_should_retain_a_filesystem_volume() {
        let mut v = json!({"spec": {}});
        PersistentVolumes.prepare_create(&mut v);
        assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(v["spec"]["volumeMode"], "Filesystem");
        assert_eq!(v["status"]["phase"], "Pending");
    }

    #[test]
    fn capacity_modes_and_exactly_one_source_should_be_required() {
        let ok = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}});
        assert!(fields(ok).is_empty());
        assert_eq!(fields(json!({})), ["spec.capacity", "spec.accessModes", "spec"]);
        let two = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/d"}, "nfs": {"server": "s", "path": "/"}});
        assert_eq!(fields(two), ["spec"]);
    }
}
