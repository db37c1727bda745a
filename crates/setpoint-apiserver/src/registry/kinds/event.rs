//! Events, served under two APIs from one storage: core/v1 (`involvedObject`, `message`, …)
//! and events.k8s.io/v1 (`regarding`, `note`, …). Setpoint stores them once, in the core form
//! under `/registry/events/`, and converts events.k8s.io/v1 objects at the edge, so
//! `kubectl get events` shows what a controller recorded through either API. core/v1 events
//! keep their legacy freedom of names; events.k8s.io/v1 ones are subdomains.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use k8s_openapi::api::{core, events};
use serde_json::{json, Map, Value};
use setpoint_core::{Cause, SelectableFields};

use crate::registry::fields::{self, Field};
use crate::registry::identity::{Identity, ALL_VERBS};
use crate::registry::strategy::{round_trip, schema_of, NameRule, Strategy, TypedSchema};
use crate::registry::table::{age, Column};
use crate::registry::validation::object_meta;
use crate::registry::ResourceDef;

pub(crate) fn resources() -> Vec<ResourceDef> {
    let identity = |group, strategy: Arc<dyn Strategy>| {
        Identity {
            group,
            version: "v1",
            kind: "Event",
            plural: "events",
            singular: "event",
            short_names: &["ev"],
            categories: &[],
            namespaced: true,
            verbs: ALL_VERBS,
        }
        .build(strategy, |_| vec![])
    };
    vec![
        identity("", Arc::new(CoreEvents)),
        identity("events.k8s.io", Arc::new(Events)),
    ]
}

const CORE_FIELDS: &[Field] = &[
    ("involvedObject.kind", "/involvedObject/kind", ""),
    ("involvedObject.namespace", "/involvedObject/namespace", ""),
    ("involvedObject.name", "/involvedObject/name", ""),
    ("involvedObject.uid", "/involvedObject/uid", ""),
    (
        "involvedObject.apiVersion",
        "/involvedObject/apiVersion",
        "",
    ),
    (
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
        "",
    ),
    ("involvedObject.fieldPath", "/involvedObject/fieldPath", ""),
    ("reason", "/reason", ""),
    ("reportingComponent", "/reportingComponent", ""),
    ("source", "/source/component", ""),
    ("type", "/type", ""),
];

/// `events.k8s.io/v1` field ↔ `core/v1` field, where the names differ.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(object: Value, from_index: usize, api_version: &str) -> Value {
    let Value::Object(map) = object else {
        return object;
    };
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        let renamed = EVENT_FIELDS
            .iter()
            .find(|pair| [pair.0, pair.1][from_index] == k)
            .map_or(k, |pair| [pair.1, pair.0][from_index].to_owned());
        out.insert(renamed, v);
    }
    out.insert("apiVersion".into(), Value::String(api_version.to_owned()));
    Value::Object(out)
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("Last Seen", 0),
        Column::new("Type", 0),
        Column::new("Reason", 0),
        Column::new("Object", 0),
        Column::new("Message", 0),
    ]
}

/// A row: `regarding` is the involved object, `last` when it last happened (else its event
/// time, else its creation), `message` what it says.
fn cells(o: &Value, regarding: &Value, last: &Value, message: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let last = [last, &o["eventTime"], &o["metadata"]["creationTimestamp"]]
        .into_iter()
        .find(|v| !v.is_null())
        .unwrap_or(&Value::Null);
    let obj = format!(
        "{}/{}",
        regarding["kind"].as_str().unwrap_or("").to_lowercase(),
        regarding["name"].as_str().unwrap_or("")
    );
    vec![
        json!(age(last, now)),
        json!(o["type"].as_str().unwrap_or("")),
        json!(o["reason"].as_str().unwrap_or("")),
        json!(obj),
        json!(message.as_str().unwrap_or("").trim()),
    ]
}

/// core/v1 Event.
#[derive(Debug)]
struct CoreEvents;

#[async_trait]
impl Strategy for CoreEvents {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<core::v1::Event>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<core::v1::Event>()
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Any
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        object_meta(object)
    }

    fn columns(&self) -> Vec<Column> {
        columns()
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        cells(o, &o["involvedObject"], &o["lastTimestamp"], &o["message"], now)
    }

    fn selectable(&self, namespaced: bool) -> SelectableFields {
        fields::selectable(CORE_FIELDS, namespaced)
    }

    fn field_set(&self, object: &Value) -> BTreeMap<String, String> {
        fields::field_set(CORE_FIELDS, object)
    }
}

/// events.k8s.io/v1 Event, stored as a core/v1 one.
#[derive(Debug)]
struct Events;

#[async_trait]
impl Strategy for Events {
    fn normalize(&self, object: &Value) -> Result<Value, String> {
        round_trip::<events::v1::Event>(object)
    }

    fn typed_schema(&self) -> Option<TypedSchema> {
        schema_of::<events::v1::Event>()
    }

    async fn validate(&self, object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        object_meta(object)
    }

    fn columns(&self) -> Vec<Column> {
        columns()
    }

    fn cells(&self, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
        cells(o, &o["regarding"], &o["deprecatedLastTimestamp"], &o["note"], now)
    }

    fn to_storage(&self, object: Value) -> Value {
        rename(object, 0, "v1")
    }
    fn serves_as_stored(&self) -> bool {
        false
    }


    fn served_from_storage(&self, object: Value) -> Value {
        rename(object, 1, "events.k8s.io/v1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_should_convert_both_ways_between_the_two_apis() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hi", "reason": "Started",
            "reportingController": "setpoint/kubelet", "deprecatedCount": 2});
        let core = Events.to_storage(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "setpoint/kubelet");
        assert_eq!(core["count"], 2);
        assert_eq!(core["reason"], "Started");
        assert_eq!(Events.served_from_storage(core), v1);
    }
}
