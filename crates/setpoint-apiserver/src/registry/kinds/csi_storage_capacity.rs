//! storage.k8s.io/v1 CSIStorageCapacity: how much storage of a class a CSI driver can provide
//! in a topology segment. The storage class is required; class and topology never change;
//! quantities are not negative. Stored only; its row is `NAME STORAGECLASSNAME CAPACITY AGE`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::storage::v1::CSIStorageCapacity;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta, quantity, required};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIStorageCapacity",
        plural: "csistoragecapacities",
        singular: "csistoragecapacity",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(CsiStorageCapacities), |_| vec![])]
}

#[derive(Debug)]
struct CsiStorageCapacities;

#[async_trait]
impl Strategy for CsiStorageCapacities {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<CSIStorageCapacity>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<CSIStorageCapacity>()
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        required(object, "/storageClassName", &mut causes);
        for field in ["capacity", "maximumVolumeSize"] {
            if !object[field].is_null() {
                quantity(&object[field], field, &mut causes);
            }
        }
        immutable(object, old, "/storageClassName", &mut causes);
        immutable(object, old, "/nodeTopology", &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("StorageClassName", 0),
            Column::new("Capacity", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            json!(o["storageClassName"].as_str().unwrap_or_default()),
            json!(o["capacity"].as_str().unwrap_or("<unset>")),
            age_cell(o, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_should_be_required_and_fixed() {
        let o = json!({"metadata": {"name": "c", "namespace": "d"}, "storageClassName": "fast", "capacity": "10Gi"});
        assert!(futures::executor::block_on(CsiStorageCapacities.validate(&o, None)).is_empty());
        let mut moved = o.clone();
        moved["storageClassName"] = json!("slow");
        moved["capacity"] = json!("-1");
        let fields: Vec<String> = futures::executor::block_on(CsiStorageCapacities.validate(&moved, Some(&o)))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["capacity", "storageClassName"]);
        assert_eq!(CsiStorageCapacities.cells(&o, Utc::now())[2], "10Gi");
    }
}
