//! How a resource's objects are stored when another resource shares their storage. Kubernetes
//! serves one set of Events under two APIs: `core/v1` (`involvedObject`, `message`, …) and
//! `events.k8s.io/v1` (`regarding`, `note`, …). Setpoint stores them once, in the core form
//! under `/registry/events/`, and converts at the edge, so `kubectl get events` shows what a
//! controller recorded through either API.

use serde_json::{Map, Value};

/// The stored form of a resource's objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Representation {
    /// Stored as served.
    Native,
    /// `events.k8s.io/v1` Events, stored as `core/v1` Events.
    EventsV1,
    /// `autoscaling/v1` HorizontalPodAutoscalers, stored as `autoscaling/v2` ones.
    AutoscalingV1,
}

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

impl Representation {
    /// The object as stored, from the object as served.
    pub(crate) fn to_storage(self, object: Value) -> Value {
        match self {
            Representation::Native => object,
            Representation::EventsV1 => rename(object, 0, "v1"),
            Representation::AutoscalingV1 => super::hpa::v1_to_v2(object),
        }
    }

    /// The object as served, from the object as stored.
    pub(crate) fn served_from_storage(self, object: Value) -> Value {
        match self {
            Representation::Native => object,
            Representation::EventsV1 => rename(object, 1, "events.k8s.io/v1"),
            Representation::AutoscalingV1 => super::hpa::v2_to_v1(object),
        }
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
        let core = Representation::EventsV1.to_storage(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "setpoint/kubelet");
        assert_eq!(core["count"], 2);
        assert_eq!(core["reason"], "Started");
        assert_eq!(Representation::EventsV1.served_from_storage(core), v1);
    }
}
