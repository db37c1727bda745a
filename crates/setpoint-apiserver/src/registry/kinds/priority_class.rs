//! scheduling.k8s.io/v1 PriorityClass (cluster-scoped): a name for a pod priority. Preemption
//! defaults to `PreemptLowerPriority`; value and preemption policy never change; names starting
//! `system-` are kept for the two built-in classes, which the server creates at start-up
//! ([`SYSTEM_CLASSES`]), and user classes stay at or below one billion. Its row is `NAME VALUE
//! GLOBAL-DEFAULT AGE PREEMPTIONPOLICY`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{json, Value};
use setpoint_core::Cause;

use crate::registry::defaults::default;
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, name_cell, Column};
use crate::registry::validation::{immutable, object_meta, one_of};
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        singular: "priorityclass",
        short_names: &["pc"],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(PriorityClasses), |_| vec![])]
}

/// The built-in classes: name, value and what they are for.
pub(crate) const SYSTEM_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "For pods a node cannot work without; they are never moved off their node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "For pods the cluster cannot work without; they may be moved to another node.",
    ),
];

/// The highest value a user-defined class may have.
const HIGHEST_USER_VALUE: i64 = 1_000_000_000;

const POLICIES: &[&str] = &["Never", "PreemptLowerPriority"];

/// A built-in class as the server creates it.
pub(crate) fn system_class(name: &str, value: i64, description: &str) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value, "description": description})
}

#[derive(Debug)]
struct PriorityClasses;

#[async_trait]
impl Strategy for PriorityClasses {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<PriorityClass>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<PriorityClass>()
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            default(map, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
    }

    async fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let value = object["value"].as_i64().unwrap_or(0);
        let system = SYSTEM_CLASSES.iter().any(|(n, v, _)| *n == name && *v == value);
        if !system {
            if name.starts_with("system-") {
                causes.push(Cause::forbidden(
                    "metadata.name",
                    "priority class names with 'system-' prefix are reserved",
                ));
            } else if value > HIGHEST_USER_VALUE {
                causes.push(Cause::forbidden(
                    "value",
                    &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_VALUE}"),
                ));
            }
        }
        one_of(object, "/preemptionPolicy", POLICIES, &mut causes);
        if let Some(old) = old {
            if old["value"] != object["value"] {
                causes.push(Cause::forbidden("value", "may not be changed in an update."));
            }
        }
        immutable(object, old, "/preemptionPolicy", &mut causes);
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::integer("Value", 0),
            Column {
                kind: "boolean".into(),
                ..Column::new("Global-Default", 0)
            },
            Column::new("Age", 0),
            Column::new("PreemptionPolicy", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            int_cell(&o["value"]),
            json!(o["globalDefault"].as_bool().unwrap_or(false)),
            age_cell(o, now),
            json!(o["preemptionPolicy"].as_str().unwrap_or_default()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: &Value, old: Option<&Value>) -> Vec<String> {
        futures::executor::block_on(PriorityClasses.validate(o, old))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn system_names_and_high_values_should_be_reserved() {
        for (name, value, description) in SYSTEM_CLASSES {
            let mut o = system_class(name, value, description);
            PriorityClasses.apply_defaults(&mut o);
            assert_eq!(o["preemptionPolicy"], "PreemptLowerPriority");
            assert!(fields(&o, None).is_empty(), "{name}");
        }
        let fake = json!({"metadata": {"name": "system-mine"}, "value": 5});
        assert_eq!(fields(&fake, None), ["metadata.name"]);
        let high = json!({"metadata": {"name": "mine"}, "value": 1_000_000_001});
        assert_eq!(fields(&high, None), ["value"]);
    }

    #[test]
    fn the_value_should_never_change() {
        let old = json!({"metadata": {"name": "p"}, "value": 5, "preemptionPolicy": "Never"});
        let new = json!({"metadata": {"name": "p"}, "value": 6, "preemptionPolicy": "Never"});
        assert_eq!(fields(&new, Some(&old)), ["value"]);
    }
}
