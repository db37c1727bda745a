//! apiregistration.k8s.io/v1 APIService (cluster-scoped): an API group-version served by
//! another server (`spec.service`) or, without a service, locally. What is done with them —
//! the local ones registered for every served group-version, requests proxied to the others,
//! their `Available` condition checked — is `aggregation/`'s; this file holds the kind's
//! rules: the name is `<version>.<group>` (any path segment: the core group's is `v1.`), the
//! priorities are in range, a CA bundle excludes skipping TLS verification. The `status`
//! subresource holds the `Available` condition the row shows (`Unknown` until one is written).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::set_status;
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, NameRule, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{object_meta, required};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "apiregistration.k8s.io",
        version: "v1",
        kind: "APIService",
        plural: "apiservices",
        singular: "apiservice",
        short_names: &[],
        categories: &["api-extensions"],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(ApiServices), |g| vec![status(g)])]
}

#[derive(Debug)]
struct ApiServices;

#[async_trait]
impl Strategy for ApiServices {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<APIService>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<APIService>()
    }

    fn has_status(&self) -> bool {
        true
    }

    /// Any path segment (the core group's is `v1.`); the name must be `VERSION.GROUP` anyway.
    fn name_rule(&self) -> NameRule {
        NameRule::Any
    }

    fn initialize(&self, object: &mut Value) {
        set_status(object, json!({}));
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        required(object, "/spec/version", &mut causes);
        let group = spec["group"].as_str().unwrap_or_default();
        let version = spec["version"].as_str().unwrap_or_default();
        let want = format!("{version}.{group}");
        let name = &object["metadata"]["name"];
        if name.as_str() != Some(want.as_str()) {
            causes.push(Cause::invalid(
                "metadata.name",
                name,
                &format!("must be `spec.version+\".\"+spec.group`: {want:?}"),
            ));
        }
        for (field, max) in [("groupPriorityMinimum", 20_000), ("versionPriority", 1_000)] {
            let value = &spec[field];
            if !value.as_i64().is_some_and(|v| v > 0 && v <= max) {
                causes.push(Cause::invalid(
                    format!("spec.{field}"),
                    value,
                    &format!("must be positive and less than {max}"),
                ));
            }
        }
        let bundle = spec["caBundle"].as_str().is_some_and(|b| !b.is_empty());
        if spec["insecureSkipTLSVerify"] == json!(true) && bundle {
            causes.push(Cause::invalid(
                "spec.insecureSkipTLSVerify",
                &spec["insecureSkipTLSVerify"],
                "may not be true if caBundle is present",
            ));
        }
        let port = &spec["service"]["port"];
        if !port.is_null() && !port.as_i64().is_some_and(|p| (1..=65535).contains(&p)) {
            causes.push(Cause::invalid("spec.service.port", port, "must be between 1 and 65535, inclusive"));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Service", 0),
            Column::new("Available", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let service = &o["spec"]["service"];
        let service = if service.is_null() {
            "Local".to_owned()
        } else {
            format!(
                "{}/{}",
                service["namespace"].as_str().unwrap_or_default(),
                service["name"].as_str().unwrap_or_default()
            )
        };
        vec![name_cell(o), json!(service), json!(available(o)), age_cell(o, now)]
    }
}

/// The `Available` cell: `True`, `False (Reason)`, or `Unknown` without the condition.
fn available(o: &Value) -> String {
    let found = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    match found {
        None => "Unknown".into(),
        Some(c) if c["status"] == "True" => "True".into(),
        Some(c) => format!(
            "{} ({})",
            c["status"].as_str().unwrap_or_default(),
            c["reason"].as_str().unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: &Value) -> Vec<String> {
        futures::executor::block_on(ApiServices.validate(o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn the_name_and_priorities_should_be_checked() {
        let good = json!({"metadata": {"name": "v1beta1.metrics.example.com"}, "spec": {"group": "metrics.example.com",
            "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"namespace": "kube-system", "name": "metrics", "port": 443}, "insecureSkipTLSVerify": true}});
        assert!(fields(&good).is_empty());
        let mut bad = good.clone();
        bad["metadata"]["name"] = json!("metrics");
        bad["spec"]["versionPriority"] = json!(0);
        bad["spec"]["caBundle"] = json!("Zm9v");
        assert_eq!(fields(&bad), ["metadata.name", "spec.versionPriority", "spec.insecureSkipTLSVerify"]);
        assert_eq!(ApiServices.cells(&good, Utc::now())[1..3], [json!("kube-system/metrics"), json!("Unknown")]);
    }
}
