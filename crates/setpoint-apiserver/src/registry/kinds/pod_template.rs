//! core/v1 PodTemplate: a named pod template (`template`) other objects may refer to. Its pod
//! spec gets the pod defaults and the pod spec checks; its row is `NAME CONTAINERS IMAGES POD
//! LABELS`, as kube-apiserver prints it (no age).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::PodTemplate;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::object_at;
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::pod_template::{default_pod_spec, template_cells, validate_pod_spec};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{labels_string, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "PodTemplate",
        plural: "podtemplates",
        singular: "podtemplate",
        short_names: &[],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(PodTemplates), |_| vec![])]
}

#[derive(Debug)]
struct PodTemplates;

#[async_trait]
impl Strategy for PodTemplates {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<PodTemplate>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<PodTemplate>()
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(spec) = object_at(object, &["template", "spec"]) {
            default_pod_spec(spec);
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        validate_pod_spec(&object["template"]["spec"], "template.spec", &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Containers", 0),
            Column::new("Images", 0),
            Column::new("Pod Labels", 0),
        ]
    }

    fn cells(&self, o: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        // The template's containers and images, as a workload's wide columns have them.
        let as_workload = json!({"spec": {"template": o["template"]}});
        let [containers, images, _] = template_cells(&as_workload);
        vec![
            name_cell(o),
            containers,
            images,
            json!(labels_string(&o["template"]["metadata"]["labels"])),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_should_get_pod_defaults_and_checks() {
        let mut t = json!({"metadata": {"name": "t"}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}});
        PodTemplates.apply_defaults(&mut t);
        assert_eq!(t["template"]["spec"]["restartPolicy"], "Always");
        let causes = futures::executor::block_on(PodTemplates.validate(&t, None));
        assert!(causes.is_empty(), "{causes:?}");
        let bad = json!({"metadata": {"name": "t"}, "template": {"spec": {"containers": []}}});
        let causes = futures::executor::block_on(PodTemplates.validate(&bad, None));
        assert_eq!(causes[0].field, "template.spec.containers");
        let cells = PodTemplates.cells(&t, Utc::now());
        assert_eq!(cells, [json!("t"), json!("c"), json!("nginx:1"), json!("a=b")]);
    }
}
