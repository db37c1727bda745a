//! core/v1 ResourceQuota: per namespace, hard limits on the resources its objects may use
//! (`spec.hard`), with the scopes they apply to. Validated as kube-apiserver does in the part
//! clients meet: quantities that parse and are not negative, known scopes, a scope selector
//! with known scope names and operators. The `status` subresource holds `hard` and `used` (filled
//! in by the `resourcequota` loop, charged by quota admission: docs/design/quota.md); the row is `NAME AGE REQUEST
//! LIMIT`, from the status as kubectl prints it.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ResourceQuota;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{object_meta, quantities};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        singular: "resourcequota",
        short_names: &["quota"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ResourceQuotas), |g| vec![status(g)])]
}

/// The scopes a quota may name.
const SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
];

/// The operators of a scope selector's expressions.
const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

#[derive(Debug)]
struct ResourceQuotas;

#[async_trait]
impl Strategy for ResourceQuotas {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<ResourceQuota>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<ResourceQuota>()
    }

    fn has_status(&self) -> bool {
        true
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        quantities(&spec["hard"], "spec.hard", &mut causes);
        quantities(&object["status"]["hard"], "status.hard", &mut causes);
        quantities(&object["status"]["used"], "status.used", &mut causes);
        for (i, scope) in spec["scopes"].as_array().into_iter().flatten().enumerate() {
            if !scope.as_str().is_some_and(|s| SCOPES.contains(&s)) {
                causes.push(Cause::not_supported(format!("spec.scopes[{i}]"), scope, SCOPES));
            }
        }
        let expressions = spec["scopeSelector"]["matchExpressions"].as_array();
        for (i, e) in expressions.into_iter().flatten().enumerate() {
            let at = format!("spec.scopeSelector.matchExpressions[{i}]");
            if !e["scopeName"].as_str().is_some_and(|s| SCOPES.contains(&s)) {
                causes.push(Cause::not_supported(format!("{at}.scopeName"), &e["scopeName"], SCOPES));
            }
            if !e["operator"].as_str().is_some_and(|o| OPERATORS.contains(&o)) {
                causes.push(Cause::not_supported(format!("{at}.operator"), &e["operator"], OPERATORS));
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Age", 0),
            Column::new("Request", 0),
            Column::new("Limit", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let (requests, limits) = usage(&o["status"]);
        vec![name_cell(o), age_cell(o, now), json!(requests), json!(limits)]
    }
}

/// The `Request` and `Limit` cells: `resource: used/hard` for each resource of `status.hard`
/// (in name order), the `limits.` ones in the second.
fn usage(status: &Value) -> (String, String) {
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for (name, hard) in status["hard"].as_object().into_iter().flatten() {
        let used = status["used"][name].as_str().unwrap_or("0");
        let cell = format!("{name}: {used}/{}", hard.as_str().unwrap_or_default());
        if name.starts_with("limits.") {
            limits.push(cell);
        } else {
            requests.push(cell);
        }
    }
    (requests.join(", "), limits.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(spec: Value) -> Vec<String> {
        let o = json!({"metadata": {"name": "q", "namespace": "d"}, "spec": spec});
        futures::executor::block_on(ResourceQuotas.validate(&o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn quantities_and_scopes_should_be_checked() {
        assert!(fields(json!({"hard": {"pods": "10", "requests.cpu": "2"}, "scopes": ["BestEffort"]})).is_empty());
        assert_eq!(fields(json!({"hard": {"pods": "ten", "cpu": "-1"}})), ["spec.hard[cpu]", "spec.hard[pods]"]);
        assert_eq!(fields(json!({"scopes": ["Sometimes"]})), ["spec.scopes[0]"]);
    }

    #[test]
    fn the_row_should_split_requests_and_limits() {
        let status = json!({"hard": {"limits.cpu": "2", "pods": "10"}, "used": {"pods": "3"}});
        assert_eq!(usage(&status), ("pods: 3/10".to_owned(), "limits.cpu: 0/2".to_owned()));
    }
}
