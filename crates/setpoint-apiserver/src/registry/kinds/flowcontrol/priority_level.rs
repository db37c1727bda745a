//! PriorityLevelConfiguration (cluster-scoped): a share of the server's concurrency. `Limited`
//! levels default to 30 nominal shares, nothing lent, and queues of 64 with hand size 8 and
//! length 50; `Exempt` levels to no shares. Exactly the section of the type is set, queuing
//! goes with `Queue` responses, and the numbers are in range. The `status` subresource holds
//! conditions; the row shows the shares and queuing.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration;
use serde_json::{json, Map, Value};
use setpoint_core::Cause;

use crate::registry::defaults::{default, object_at};
use crate::registry::identity::{status, Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, Strategy, TypedSchema};
use crate::registry::table::{age_cell, name_cell, Column};
use crate::registry::validation::{at_least, object_meta, one_of};
use crate::registry::ResourceDef;

pub(super) fn resource() -> ResourceDef {
    Identity {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        kind: "PriorityLevelConfiguration",
        plural: "prioritylevelconfigurations",
        singular: "prioritylevelconfiguration",
        short_names: &[],
        categories: &[],
        namespaced: false,
        verbs: ALL_VERBS,
    }
    .build(Arc::new(PriorityLevels), |g| vec![status(g)])
}

/// The most queues a level may have.
const MAX_QUEUES: i64 = 10_000;

#[derive(Debug)]
struct PriorityLevels;

/// Sets `map[key]` to `value` when it is absent, null or 0 (the defaults of fields whose zero
/// means "unset").
fn default_nonzero(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).and_then(Value::as_i64).is_none_or(|v| v == 0) {
        map.insert(key.to_owned(), value);
    }
}

#[async_trait]
impl Strategy for PriorityLevels {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<PriorityLevelConfiguration>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<PriorityLevelConfiguration>()
    }

    fn has_generation(&self) -> bool {
        true
    }

    fn has_status(&self) -> bool {
        true
    }

    fn apply_defaults(&self, object: &mut Value) {
        if let Some(exempt) = object_at(object, &["spec", "exempt"]) {
            default(exempt, "nominalConcurrencyShares", json!(0));
            default(exempt, "lendablePercent", json!(0));
        }
        if let Some(limited) = object_at(object, &["spec", "limited"]) {
            default(limited, "nominalConcurrencyShares", json!(30));
            default(limited, "lendablePercent", json!(0));
        }
        if let Some(queuing) = object_at(object, &["spec", "limited", "limitResponse", "queuing"]) {
            default_nonzero(queuing, "queues", json!(64));
            default_nonzero(queuing, "handSize", json!(8));
            default_nonzero(queuing, "queueLengthLimit", json!(50));
        }
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        let mut causes = object_meta(object);
        let spec = &object["spec"];
        let kind = spec["type"].as_str();
        one_of(object, "/spec/type", &["Exempt", "Limited"], &mut causes);
        if kind.is_none() {
            causes.push(Cause::required("spec.type"));
        }
        match (kind, spec["limited"].is_null(), spec["exempt"].is_null()) {
            (Some("Limited"), true, _) => causes.push(Cause::required("spec.limited")),
            (Some("Limited"), false, false) => {
                causes.push(Cause::forbidden("spec.exempt", "must be nil if the type is Limited"));
            }
            (Some("Exempt"), false, _) => {
                causes.push(Cause::forbidden("spec.limited", "must be nil if the type is not Limited"));
            }
            _ => {}
        }
        for section in ["limited", "exempt"] {
            at_least(object, &format!("/spec/{section}/nominalConcurrencyShares"), 0, &mut causes);
            percent(object, &format!("spec.{section}.lendablePercent"), &mut causes);
        }
        at_least(object, "/spec/limited/borrowingLimitPercent", 0, &mut causes);
        let response = &spec["limited"]["limitResponse"];
        if !spec["limited"].is_null() {
            one_of(object, "/spec/limited/limitResponse/type", &["Queue", "Reject"], &mut causes);
            match (response["type"].as_str(), response["queuing"].is_null()) {
                (None, _) => causes.push(Cause::required("spec.limited.limitResponse.type")),
                (Some("Queue"), true) => causes.push(Cause::required("spec.limited.limitResponse.queuing")),
                (Some("Reject"), false) => causes.push(Cause::forbidden(
                    "spec.limited.limitResponse.queuing",
                    "must be nil if limited.limitResponse.type is not Limited",
                )),
                _ => {}
            }
        }
        let queuing = &response["queuing"];
        if !queuing.is_null() {
            queuing_problems(queuing, &mut causes);
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::new("Type", 0),
            Column::new("NominalConcurrencyShares", 0),
            Column::new("Queues", 0),
            Column::new("HandSize", 0),
            Column::new("QueueLengthLimit", 0),
            Column::new("Age", 0),
        ]
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let limited = &o["spec"]["limited"];
        let queuing = &limited["limitResponse"]["queuing"];
        let number = |v: &Value| json!(v.as_i64().map_or("<none>".to_owned(), |n| n.to_string()));
        vec![
            name_cell(o),
            json!(o["spec"]["type"].as_str().unwrap_or_default()),
            number(&limited["nominalConcurrencyShares"]),
            number(&queuing["queues"]),
            number(&queuing["handSize"]),
            number(&queuing["queueLengthLimit"]),
            age_cell(o, now),
        ]
    }
}

/// A problem if the percentage at `field` is outside 0..=100.
fn percent(object: &Value, field: &str, causes: &mut Vec<Cause>) {
    let pointer = format!("/{}", field.replace('.', "/"));
    let value = object.pointer(&pointer).unwrap_or(&Value::Null);
    if value.as_i64().is_some_and(|p| !(0..=100).contains(&p)) {
        causes.push(Cause::invalid(field, value, "must be between 0 and 100, inclusive"));
    }
}

/// The problems of a queuing configuration: positive sizes, a hand no bigger than the queues.
fn queuing_problems(queuing: &Value, causes: &mut Vec<Cause>) {
    let at = "spec.limited.limitResponse.queuing";
    let queues = queuing["queues"].as_i64().unwrap_or(0);
    if !(1..=MAX_QUEUES).contains(&queues) {
        causes.push(Cause::invalid(format!("{at}.queues"), &queuing["queues"], &format!("must be between 1 and {MAX_QUEUES}, inclusive")));
    }
    if queuing["queueLengthLimit"].as_i64().unwrap_or(0) <= 0 {
        causes.push(Cause::invalid(format!("{at}.queueLengthLimit"), &queuing["queueLengthLimit"], "must be positive"));
    }
    let hand = queuing["handSize"].as_i64().unwrap_or(0);
    if hand <= 0 {
        causes.push(Cause::invalid(format!("{at}.handSize"), &queuing["handSize"], "must be positive"));
    } else if hand > queues {
        causes.push(Cause::invalid(
            format!("{at}.handSize"),
            &queuing["handSize"],
            &format!("should not be greater than queues ({queues})"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(spec: Value) -> Value {
        let mut o = json!({"metadata": {"name": "p"}, "spec": spec});
        PriorityLevels.apply_defaults(&mut o);
        o
    }

    fn fields(o: &Value) -> Vec<String> {
        futures::executor::block_on(PriorityLevels.validate(o, None))
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn limited_levels_should_default_shares_and_queues() {
        let o = prepared(json!({"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}));
        let limited = &o["spec"]["limited"];
        assert_eq!(limited["nominalConcurrencyShares"], 30);
        assert_eq!(limited["lendablePercent"], 0);
        assert_eq!(limited["limitResponse"]["queuing"], json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50}));
        assert!(fields(&o).is_empty());
        let cells = PriorityLevels.cells(&o, Utc::now());
        assert_eq!(cells[1..6], [json!("Limited"), json!("30"), json!("64"), json!("8"), json!("50")]);
    }

    #[test]
    fn sections_should_match_the_type() {
        let o = prepared(json!({"type": "Exempt", "limited": {"limitResponse": {"type": "Reject"}}}));
        assert_eq!(fields(&o), ["spec.limited"]);
        let o = prepared(json!({"type": "Limited", "limited": {"lendablePercent": 101,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 2, "handSize": 4}}}}));
        assert_eq!(fields(&o), ["spec.limited.lendablePercent", "spec.limited.limitResponse.queuing.handSize"]);
    }
}
