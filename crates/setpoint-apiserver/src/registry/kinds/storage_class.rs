//! storage.k8s.io/v1 StorageClass (cluster-scoped): how volumes of a class are provisioned.
//! Defaults as kube-apiserver's: reclaim policy `Delete`, binding mode `Immediate`. The
//! provisioner is required; provisioner, parameters, reclaim policy and binding mode never
//! change. Stored only: no provisioner runs in Setpoint. Its row marks the default class
//! (`standard (default)`).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::default;
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, Column};
use crate::registry::validation::{object_meta, one_of, required};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        short_names: &["sc"],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(StorageClasses), |_| vec![])]
}

/// The fields an update may not change.
const FIXED: &[&str] = &["parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"];

/// The annotation that makes a class the default.
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

#[derive(Debug)]
struct StorageClasses;

#[async_trait]
impl Strategy for StorageClasses {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<StorageClass>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<StorageClass>()
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            default(map, "reclaimPolicy", json!("Delete"));
            default(map, "volumeBindingMode", json!("Immediate"));
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        required(object, "/provisioner", &mut causes);
        one_of(object, "/reclaimPolicy", &["Delete", "Retain"], &mut causes);
        one_of(object, "/volumeBindingMode", &["Immediate", "WaitForFirstConsumer"], &mut causes);
        if let Some(old) = old {
            for field in FIXED {
                if object[*field] != old[*field] {
                    causes.push(Cause::forbidden(*field, &format!("updates to {field} are forbidden.")));
                }
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Provisioner", 0),
            Column::new("ReclaimPolicy", 0),
            Column::new("VolumeBindingMode", 0),
            Column::new("AllowVolumeExpansion", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let annotations = &o["metadata"]["annotations"];
        let is_default = annotations[DEFAULT_CLASS] == "true"
            || annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true";
        let text = |v: &Value| json!(v.as_str().unwrap_or_default());
        vec![
            json!(if is_default { format!("{name} (default)") } else { name.to_owned() }),
            text(&o["provisioner"]),
            text(&o["reclaimPolicy"]),
            text(&o["volumeBindingMode"]),
            json!(o["allowVolumeExpansion"].as_bool().unwrap_or(false)),
            age_cell(o, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_fixed_fields_should_match_kube_apiserver() {
        let mut o = json!({"metadata": {"name": "fast", "annotations": {DEFAULT_CLASS: "true"}}, "provisioner": "example.com/disk"});
        StorageClasses.apply_defaults(&mut o);
        assert_eq!((o["reclaimPolicy"].clone(), o["volumeBindingMode"].clone()), (json!("Delete"), json!("Immediate")));
        assert!(futures::executor::block_on(StorageClasses.validate(&o, None)).is_empty());
        let mut moved = o.clone();
        moved["provisioner"] = json!("example.com/other");
        let causes = futures::executor::block_on(StorageClasses.validate(&moved, Some(&o)));
        assert_eq!(causes[0].field, "provisioner");
        assert_eq!(StorageClasses.cells(&o, Utc::now())[0], "fast (default)");
    }
}
