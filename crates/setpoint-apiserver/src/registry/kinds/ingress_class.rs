//! networking.k8s.io/v1 IngressClass (cluster-scoped): which controller implements a class of
//! ingresses, with optional parameters. The controller is required, at most 250 characters
//! and never changes; parameters name a kind and a name, and a namespace exactly when their
//! scope is `Namespace`. Its row is `NAME CONTROLLER PARAMETERS AGE`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::networking::v1::IngressClass;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta, one_of, required};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IngressClass",
        plural: "ingressclasses",
        singular: "ingressclass",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(IngressClasses), |_| vec![])]
}

/// The longest controller name.
const MAX_CONTROLLER: usize = 250;

#[derive(Debug)]
struct IngressClasses;

#[async_trait]
impl Strategy for IngressClasses {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<IngressClass>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<IngressClass>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        required(object, "/spec/controller", &mut causes);
        let controller = &object["spec"]["controller"];
        if controller.as_str().is_some_and(|c| c.len() > MAX_CONTROLLER) {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "spec.controller",
                format!("spec.controller: Too long: may not be more than {MAX_CONTROLLER} bytes"),
            ));
        }
        immutable(object, old, "/spec/controller", &mut causes);
        let params = &object["spec"]["parameters"];
        if !params.is_null() {
            required(object, "/spec/parameters/kind", &mut causes);
            required(object, "/spec/parameters/name", &mut causes);
            one_of(object, "/spec/parameters/scope", &["Cluster", "Namespace"], &mut causes);
            let namespaced = params["scope"] == "Namespace";
            match (namespaced, params["namespace"].is_null()) {
                (true, true) => causes.push(Cause::new(
                    "FieldValueRequired",
                    "spec.parameters.namespace",
                    "spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'",
                )),
                (false, false) => causes.push(Cause::forbidden(
                    "spec.parameters.namespace",
                    "`parameters.scope` is set to 'Cluster'",
                )),
                _ => {}
            }
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Controller", 0),
            Column::new("Parameters", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let params = &o["spec"]["parameters"];
        let parameters = if params.is_null() {
            "<none>".to_owned()
        } else {
            let kind = params["kind"].as_str().unwrap_or_default();
            let name = params["name"].as_str().unwrap_or_default();
            match params["apiGroup"].as_str() {
                Some(group) => format!("{kind}.{group}/{name}"),
                None => format!("{kind}/{name}"),
            }
        };
        vec![
            name_cell(o),
            json!(o["spec"]["controller"].as_str().unwrap_or_default()),
            json!(parameters),
            age_cell(o, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(IngressClasses.validate(o, old))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn the_controller_should_be_required_and_fixed() {
        let o = json!({"metadata": {"name": "nginx"}, "spec": {"controller": "example.com/ingress",
            "parameters": {"kind": "Config", "apiGroup": "example.com", "name": "c", "scope": "Namespace"}}});
        assert_eq!(fields(&o, None), ["spec.parameters.namespace"]);
        assert_eq!(fields(&json!({"metadata": {"name": "x"}, "spec": {}}), None), ["spec.controller"]);
        let mut moved = o.clone();
        moved["spec"]["controller"] = json!("example.com/other");
        moved["spec"]["parameters"]["namespace"] = json!("ns");
        assert_eq!(fields(&moved, Some(&o)), ["spec.controller"]);
        assert_eq!(IngressClasses.cells(&o, Utc::now())[2], "Config.example.com/c");
    }
}
