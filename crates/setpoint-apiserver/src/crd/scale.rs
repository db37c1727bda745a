//! The `scale` subresource of a custom resource: an `autoscaling/v1 Scale` whose
//! `spec.replicas` is read from and written to the CRD's `specReplicasPath`, whose
//! `status.replicas` comes from `statusReplicasPath` and `status.selector` from
//! `labelSelectorPath`.

use serde_json::{json, Value};

use super::jsonpath::{self, JsonPath};
use crate::registry::strategy::scale_document;
use crate::registry::ScaleView;

/// `spec.versions[*].subresources.scale`, parsed.
#[derive(Debug)]
pub(crate) struct ScalePaths {
    spec_replicas: JsonPath,
    status_replicas: JsonPath,
    label_selector: Option<JsonPath>,
}

impl ScalePaths {
    /// Parses the CRD's scale subresource; the paths were validated with the CRD.
    pub(crate) fn parse(v: &Value) -> Result<ScalePaths, String> {
        let path = |key: &str| -> Result<Option<JsonPath>, String> {
            v.get(key)
                .and_then(Value::as_str)
                .map(JsonPath::parse)
                .transpose()
        };
        let spec_replicas = path("specReplicasPath")?.ok_or("specReplicasPath: Required value")?;
        if spec_replicas.fields().is_none() {
            return Err("specReplicasPath: must be a path of fields".into());
        }
        Ok(ScalePaths {
            spec_replicas,
            status_replicas: path("statusReplicasPath")?
                .ok_or("statusReplicasPath: Required value")?,
            label_selector: path("labelSelectorPath")?,
        })
    }
}

impl ScaleView for ScalePaths {
    fn scale_of(&self, o: &Value) -> Value {
        let first_int = |p: &JsonPath| p.select(o).first().and_then(|v| v.as_i64()).unwrap_or(0);
        let mut status = json!({"replicas": first_int(&self.status_replicas)});
        if let Some(selector) = self.label_selector.as_ref().and_then(|p| {
            p.select(o)
                .first()
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        }) {
            status["selector"] = json!(selector);
        }
        scale_document(o, first_int(&self.spec_replicas), status)
    }

    fn set_replicas(&self, o: &mut Value, replicas: i64) {
        if let Some(fields) = self.spec_replicas.fields() {
            jsonpath::set(o, &fields, json!(replicas));
        }
    }

    fn replicas_field(&self) -> Vec<String> {
        self.spec_replicas
            .fields()
            .unwrap_or_default()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }
}
