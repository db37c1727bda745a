//! storage.k8s.io/v1 CSIDriver (cluster-scoped): how Kubernetes talks to a CSI volume driver.
//! Defaults as kube-apiserver 1.33's: attach required, no pod info on mount, no republish, no
//! capacity tracking, no SELinux mount, fsGroup policy `ReadWriteOnceWithFSType`, `Persistent`
//! volumes. `attachRequired`, `fsGroupPolicy` and `volumeLifecycleModes` never change. Stored
//! only.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::storage::v1::CSIDriver;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::{default, object_at};
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta, one_of};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIDriver",
        plural: "csidrivers",
        singular: "csidriver",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(CsiDrivers), |_| vec![])]
}

const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
const MODES: &[&str] = &["Ephemeral", "Persistent"];

#[derive(Debug)]
struct CsiDrivers;

#[async_trait]
impl Strategy for CsiDrivers {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<CSIDriver>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<CSIDriver>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["spec"]) {
            default(spec, "attachRequired", json!(true));
            default(spec, "podInfoOnMount", json!(false));
            default(spec, "requiresRepublish", json!(false));
            default(spec, "storageCapacity", json!(false));
            default(spec, "seLinuxMount", json!(false));
            default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
            default(spec, "volumeLifecycleModes", json!(["Persistent"]));
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let name = &object["metadata"]["name"];
        if name.as_str().is_some_and(|n| n.len() > 63) {
            causes.push(Cause::invalid("metadata.name", name, "must be no more than 63 characters"));
        }
        one_of(object, "/spec/fsGroupPolicy", FS_GROUP_POLICIES, &mut causes);
        let modes = object["spec"]["volumeLifecycleModes"].as_array();
        for (i, mode) in modes.into_iter().flatten().enumerate() {
            if !mode.as_str().is_some_and(|m| MODES.contains(&m)) {
                causes.push(Cause::not_supported(format!("spec.volumeLifecycleModes[{i}]"), mode, MODES));
            }
        }
        for field in ["attachRequired", "fsGroupPolicy", "volumeLifecycleModes"] {
            immutable(object, old, &format!("/spec/{field}"), &mut causes);
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("AttachRequired", 0),
            Column::new("PodInfoOnMount", 0),
            Column::new("StorageCapacity", 0),
            Column::new("TokenRequests", 0),
            Column::new("RequiresRepublish", 0),
            Column::new("Modes", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let spec = &o["spec"];
        let flag = |f: &str| json!(spec[f].as_bool().unwrap_or(false));
        let tokens: Vec<&str> = spec["tokenRequests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["audience"].as_str())
            .collect();
        let modes: Vec<&str> = spec["volumeLifecycleModes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        vec![
            name_cell(o),
            flag("attachRequired"),
            flag("podInfoOnMount"),
            flag("storageCapacity"),
            json!(if tokens.is_empty() { "<unset>".to_owned() } else { tokens.join(",") }),
            flag("requiresRepublish"),
            json!(modes.join(",")),
            age_cell(o, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_fixed_fields_should_match_kube_apiserver() {
        let mut o = json!({"metadata": {"name": "disk.example.com"}, "spec": {}});
        CsiDrivers.apply_defaults(&mut o);
        assert_eq!(o["spec"]["attachRequired"], true);
        assert_eq!(o["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
        assert_eq!(o["spec"]["volumeLifecycleModes"], json!(["Persistent"]));
        let mut changed = o.clone();
        changed["spec"]["attachRequired"] = json!(false);
        changed["spec"]["storageCapacity"] = json!(true);
        let causes = futures::executor::block_on(CsiDrivers.validate(&changed, Some(&o)));
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.attachRequired"]);
    }
}
