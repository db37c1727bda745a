//! storage.k8s.io/v1 VolumeAttachment (cluster-scoped): a request to attach a volume to a
//! node, for the CSI attacher named. Attacher and node are required, the source is exactly one
//! of a persistent volume's name and an inline volume, and the spec never changes. The
//! `status` subresource says whether it is attached (no attacher runs in Setpoint); its row is
//! `NAME ATTACHER PV NODE ATTACHED AGE`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::set_status;
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta, required};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "storage.k8s.io",
        version: "v1",
        kind: "VolumeAttachment",
        plural: "volumeattachments",
        singular: "volumeattachment",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(VolumeAttachments), |g| vec![status(g)])]
}

#[derive(Debug)]
struct VolumeAttachments;

#[async_trait]
impl Strategy for VolumeAttachments {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<VolumeAttachment>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<VolumeAttachment>()
    }

    fn has_status(&self) -> bool {
        true
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, json!({"attached": false}));
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        required(object, "/spec/attacher", &mut causes);
        required(object, "/spec/nodeName", &mut causes);
        let source = &object["spec"]["source"];
        let given = [&source["persistentVolumeName"], &source["inlineVolumeSpec"]]
            .iter()
            .filter(|v| !v.is_null())
            .count();
        match given {
            0 => causes.push(Cause::new(
                "FieldValueRequired",
                "spec.source",
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            )),
            1 => {}
            _ => causes.push(Cause::forbidden(
                "spec.source",
                "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            )),
        }
        immutable(object, old, "/spec", &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Attacher", 0),
            Column::new("PV", 0),
            Column::new("Node", 0),
            Column {
                kind: "boolean".into(),
                ..Column::new("Attached", 0)
            },
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let spec = &o["spec"];
        let text = |v: &Value| json!(v.as_str().unwrap_or_default());
        vec![
            name_cell(o),
            text(&spec["attacher"]),
            text(&spec["source"]["persistentVolumeName"]),
            text(&spec["nodeName"]),
            json!(o["status"]["attached"].as_bool().unwrap_or(false)),
            age_cell(o, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(VolumeAttachments.validate(o, old))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn one_source_and_a_fixed_spec_should_be_required() {
        let o = json!({"metadata": {"name": "a"}, "spec": {"attacher": "disk.example.com", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv1"}}});
        assert!(fields(&o, None).is_empty());
        assert_eq!(fields(&json!({"metadata": {"name": "a"}, "spec": {}}), None), ["spec.attacher", "spec.nodeName", "spec.source"]);
        let mut moved = o.clone();
        moved["spec"]["nodeName"] = json!("n2");
        assert_eq!(fields(&moved, Some(&o)), ["spec"]);
    }
}
