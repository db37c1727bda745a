//! policy/v1 PodDisruptionBudget: how many of the pods a selector picks may be down at once
//! through voluntary disruptions (evictions, drains): `minAvailable` or `maxUnavailable`, as a
//! count or a percentage. The disruption loop writes its `status`; its row shows both bounds and
//! the disruptions allowed now.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{json, Value};
use setpoint_core::{Cause, LabelSelector};

use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, int_cell, name_cell, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![Identity {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        short_names: &["pdb"],
        categories: &[],
        namespaced: true,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(PodDisruptionBudgets), |g| vec![status(g)])]
}

/// The values `spec.unhealthyPodEvictionPolicy` may take.
const EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

#[derive(Debug)]
struct PodDisruptionBudgets;

#[async_trait]
impl Strategy for PodDisruptionBudgets {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<PodDisruptionBudget>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<PodDisruptionBudget>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn initialize(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            map.insert(
                "status".into(),
                json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
            );
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
            causes.push(Cause::invalid(
                "spec",
                spec,
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        for field in ["minAvailable", "maxUnavailable"] {
            int_or_percent(&spec[field], &format!("spec.{field}"), &mut causes);
        }
        let selector = &spec["selector"];
        if !selector.is_null() {
            if let Err(e) = LabelSelector::from_structured(selector) {
                causes.push(Cause::invalid("spec.selector", selector, &e.to_string()));
            }
        }
        let policy = &spec["unhealthyPodEvictionPolicy"];
        if policy
            .as_str()
            .is_some_and(|p| !EVICTION_POLICIES.contains(&p))
        {
            causes.push(Cause::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                policy,
                EVICTION_POLICIES,
            ));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Min Available", 0),
            Column::new("Max Unavailable", 0),
            Column::integer("Allowed Disruptions", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name_cell(o),
            json!(bound(&o["spec"]["minAvailable"])),
            json!(bound(&o["spec"]["maxUnavailable"])),
            int_cell(&o["status"]["disruptionsAllowed"]),
            age_cell(o, now),
        ]
    }
}

/// A bound as the table prints it: the count or percentage, or `N/A` when unset.
fn bound(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => "N/A".to_owned(),
    }
}

/// The problems of an int-or-percent bound: a count of at least 0, or a percentage of at
/// most 100%.
fn int_or_percent(value: &Value, field: &str, causes: &mut Vec<Cause>) {
    match value {
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => causes.push(Cause::invalid(
            field,
            value,
            "must be greater than or equal to 0",
        )),
        Value::String(s) => {
            let percent = s
                .strip_suffix('%')
                .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
            match percent.map(str::parse::<u64>) {
                None => causes.push(Cause::invalid(
                    field,
                    value,
                    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )),
                Some(Ok(p)) if p <= 100 => {}
                Some(_) => causes.push(Cause::invalid(field, value, "must not be greater than 100%")),
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(spec: Value) -> Vec<Cause> {
        let object = json!({"metadata": {"name": "b", "namespace": "d"}, "spec": spec});
        futures::executor::block_on(PodDisruptionBudgets.validate(&object, None))
    }

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn counts_and_percentages_up_to_100_should_be_valid() {
        for spec in [
            json!({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}),
            json!({"maxUnavailable": "25%"}),
            json!({"minAvailable": "100%", "unhealthyPodEvictionPolicy": "AlwaysAllow"}),
            json!({}),
        ] {
            assert!(validate(spec.clone()).is_empty(), "{spec}");
        }
    }

    #[test]
    fn both_bounds_bad_values_and_unknown_policies_should_be_refused() {
        let causes = validate(json!({"minAvailable": 1, "maxUnavailable": 1}));
        assert_eq!(fields(&causes), ["spec"], "{causes:?}");
        let causes = validate(json!({"minAvailable": -1}));
        assert_eq!(fields(&causes), ["spec.minAvailable"], "{causes:?}");
        for bad in ["150%", "ten", "%", "1.5%"] {
            let causes = validate(json!({"maxUnavailable": bad}));
            assert_eq!(fields(&causes), ["spec.maxUnavailable"], "{bad}: {causes:?}");
        }
        let causes = validate(json!({"unhealthyPodEvictionPolicy": "Never"}));
        assert_eq!(fields(&causes), ["spec.unhealthyPodEvictionPolicy"], "{causes:?}");
    }

    #[test]
    fn the_row_should_show_both_bounds_and_the_allowed_disruptions() {
        let o = json!({"metadata": {"name": "b"}, "spec": {"minAvailable": "50%"},
            "status": {"disruptionsAllowed": 1}});
        let cells = PodDisruptionBudgets.cells(&o, Utc::now());
        assert_eq!(cells[..4], [json!("b"), json!("50%"), json!("N/A"), json!(1)]);
    }
}
