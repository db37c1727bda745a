//! core/v1 PersistentVolumeClaim: a request for storage. Defaults as kube-apiserver's: volume
//! mode `Filesystem`, a new claim `Pending`. It needs access modes and a `storage` request;
//! after creation only `resources.requests`, `volumeAttributesClassName` and an unset
//! `volumeName` and an unset `storageClassName` may change. The `status` subresource (written by
//! the `persistentvolume-binder` loop) and the
//! `kubectl get pvc` row.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::{default, object_at, set_status};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{access_modes, object_meta, one_of, quantities};
use crate::registry::volumes::{
    access_modes_string, attributes_class, VOLUME_MODES,
};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        short_names: &["pvc"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(PersistentVolumeClaims), |g| vec![status(g)])]
}

#[derive(Debug)]
struct PersistentVolumeClaims;

/// The claim's spec without what may change after creation.
fn fixed_spec(spec: &Value, volume_bound: bool) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        map.remove("volumeAttributesClassName");
        if !volume_bound {
            map.remove("volumeName");
        }
        // An unset class may be set (the binder gives class-less claims the default class, as
        // Kubernetes' retroactive default StorageClass assignment does).
        if map.get("storageClassName").is_none_or(Value::is_null) {
            map.remove("storageClassName");
        }
        if let Some(resources) = map.get_mut("resources").and_then(Value::as_object_mut) {
            resources.remove("requests");
        }
    }
    spec
}

#[async_trait]
impl Strategy for PersistentVolumeClaims {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<PersistentVolumeClaim>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<PersistentVolumeClaim>()
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "volumeMode", json!("Filesystem"));
        }
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, json!({"phase": "Pending"}));
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        access_modes(object, "/spec/accessModes", &mut causes);
        let requests = &spec["resources"]["requests"];
        if requests["storage"].is_null() {
            causes.push(Cause::required("spec.resources[storage]"));
        }
        quantities(requests, "spec.resources.requests", &mut causes);
        quantities(&spec["resources"]["limits"], "spec.resources.limits", &mut causes);
        one_of(object, "/spec/volumeMode", VOLUME_MODES, &mut causes);
        if let Some(old) = old {
            let bound = old["spec"]["volumeName"].as_str().is_some_and(|v| !v.is_empty());
            let mut new_fixed = fixed_spec(spec, bound);
            let old_fixed = fixed_spec(&old["spec"], bound);
            if old_fixed.get("storageClassName").is_none() {
                if let Some(map) = new_fixed.as_object_mut() {
                    map.remove("storageClassName");
                }
            }
            if new_fixed != old_fixed {
                causes.push(Cause::forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                ));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Status", 0),
            Column::new("Volume", 0),
            Column::new("Capacity", 0),
            Column::new("Access Modes", 0),
            Column::new("StorageClass", 0),
            Column::new("VolumeAttributesClass", 0),
            Column::new("Age", 0),
            Column::new("VolumeMode", 1),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let (spec, status) = (&o["spec"], &o["status"]);
        let phase = if o["metadata"]["deletionTimestamp"].is_null() {
            status["phase"].as_str().unwrap_or_default()
        } else {
            "Terminating"
        };
        let bound = spec["volumeName"].as_str().is_some_and(|v| !v.is_empty());
        let (capacity, modes) = if bound {
            (
                status["capacity"]["storage"].as_str().unwrap_or_default().to_owned(),
                access_modes_string(&status["accessModes"]),
            )
        } else {
            (String::new(), String::new())
        };
        let class = spec["storageClassName"]
            .as_str()
            .or_else(|| o["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"].as_str())
            .unwrap_or_default();
        vec![
            name_cell(o),
            json!(phase),
            json!(spec["volumeName"].as_str().unwrap_or_default()),
            json!(capacity),
            json!(modes),
            json!(class),
            attributes_class(spec),
            age_cell(o, now),
            json!(spec["volumeMode"].as_str().unwrap_or_default()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(spec: Value) -> Value {
        json!({"metadata": {"name": "c", "namespace": "d"}, "spec": spec})
    }

    fn fields(o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(PersistentVolumeClaims.validate(o, old))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn a_new_claim_should_be_a_pending_filesystem_claim() {
        let mut c = claim(json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}));
        PersistentVolumeClaims.prepare_create(&mut c);
        assert_eq!(c["spec"]["volumeMode"], "Filesystem");
        assert_eq!(c["status"], json!({"phase": "Pending"}), "claims have no phase transition time");
        assert!(fields(&c, None).is_empty());
        assert_eq!(
            fields(&claim(json!({})), None),
            ["spec.accessModes", "spec.resources[storage]"]
        );
    }

    #[test]
    fn only_requests_may_change_after_creation() {
        let old = claim(json!({"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}}}));
        let mut bigger = old.clone();
        bigger["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(fields(&bigger, Some(&old)).is_empty());
        let mut modes = old.clone();
        modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(fields(&modes, Some(&old)), ["spec"]);
    }

    #[test]
    fn an_unset_class_may_be_set_once() {
        let old = claim(json!({"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}}}));
        let mut classed = old.clone();
        classed["spec"]["storageClassName"] = json!("standard");
        assert!(fields(&classed, Some(&old)).is_empty());
        let mut changed = classed.clone();
        changed["spec"]["storageClassName"] = json!("fast");
        assert_eq!(fields(&changed, Some(&classed)), ["spec"]);
        let mut cleared = classed.clone();
        cleared["spec"]["storageClassName"] = Value::Null;
        assert_eq!(fields(&cleared, Some(&classed)), ["spec"]);
    }
}
