//! node.k8s.io/v1 RuntimeClass (cluster-scoped): a container runtime configuration pods may
//! ask for. The handler is a DNS label and never changes; a pod overhead is a list of
//! quantities. Stored only (Setpoint's node agent has one runtime); its row is `NAME HANDLER
//! AGE`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::node::v1::RuntimeClass;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, validate_name, NameRule, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta, quantities};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "node.k8s.io",
        version: "v1",
        kind: "RuntimeClass",
        plural: "runtimeclasses",
        singular: "runtimeclass",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(RuntimeClasses), |_| vec![])]
}

#[derive(Debug)]
struct RuntimeClasses;

#[async_trait]
impl Strategy for RuntimeClasses {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<RuntimeClass>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<RuntimeClass>()
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        match object["handler"].as_str() {
            None | Some("") => causes.push(Cause::required("handler")),
            Some(handler) => {
                for problem in validate_name(handler, NameRule::Label) {
                    causes.push(Cause::invalid("handler", &object["handler"], &problem));
                }
            }
        }
        quantities(&object["overhead"]["podFixed"], "overhead.podFixed", &mut causes);
        immutable(object, old, "/handler", &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::name(), Column::new("Handler", 0), Column::new("Age", 0)]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name_cell(o), json!(o["handler"].as_str().unwrap_or_default()), age_cell(o, now)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handler_should_be_a_fixed_dns_label() {
        let o = json!({"metadata": {"name": "gvisor"}, "handler": "runsc", "overhead": {"podFixed": {"memory": "64Mi"}}});
        assert!(futures::executor::block_on(RuntimeClasses.validate(&o, None)).is_empty());
        let bad = json!({"metadata": {"name": "x"}, "handler": "Not_A_Label"});
        let causes = futures::executor::block_on(RuntimeClasses.validate(&bad, None));
        assert_eq!(causes[0].field, "handler");
        let mut moved = o.clone();
        moved["handler"] = json!("runc");
        let causes = futures::executor::block_on(RuntimeClasses.validate(&moved, Some(&o)));
        assert_eq!(causes[0].field, "handler");
    }
}
