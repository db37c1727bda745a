//! `metadata.managedFields` on the wire: decoding its entries into [`Managers`] and writing
//! them back as kube-apiserver does — `Apply` entries first, then by time, then by manager;
//! `fieldsType: FieldsV1`; at most ten `Update` entries, the oldest merged into one
//! `ancient-changes` entry.

use serde_json::{json, Map, Value};
use setpoint_core::fieldpath::{FieldSet, Managed, ManagerKey, Managers, Operation};

/// How many `Update` entries an object keeps.
const MAX_UPDATE_ENTRIES: usize = 10;
/// The manager the oldest `Update` entries are merged into.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// The managers an object's `metadata.managedFields` names; `None` if it has none or they do
/// not decode (an entry without a manager-less-than-valid operation, a `fieldsV1` that is not
/// a field set, …).
pub(crate) fn decode(object: &Value) -> Option<Managers> {
    let entries = object["metadata"]["managedFields"].as_array()?;
    if entries.is_empty() {
        return None;
    }
    let mut managers = Managers::new();
    for entry in entries {
        let operation = match entry["operation"].as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        if entry
            .get("fieldsType")
            .is_some_and(|t| t.as_str() != Some("FieldsV1"))
        {
            return None;
        }
        let set = match entry.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(fields) => FieldSet::from_fields_v1(fields).ok()?,
        };
        let key = ManagerKey {
            manager: entry["manager"].as_str().unwrap_or_default().to_owned(),
            operation,
            subresource: entry["subresource"].as_str().unwrap_or_default().to_owned(),
        };
        let managed = Managed {
            set,
            api_version: entry["apiVersion"].as_str().unwrap_or_default().to_owned(),
            time: entry["time"].as_str().map(str::to_owned),
        };
        match managers.get_mut(&key) {
            Some(existing) => existing.set.union_with(&managed.set),
            None => {
                managers.insert(key, managed);
            }
        }
    }
    Some(managers)
}

/// Whether the object asks for its managed fields to be cleared: exactly one empty entry.
pub(crate) fn is_reset(object: &Value) -> bool {
    object["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|e| e.len() == 1 && e[0].as_object().is_some_and(Map::is_empty))
}

/// The `managedFields` value of `managers`, every entry without a time stamped `now`.
pub(crate) fn encode(mut managers: Managers, now: &str) -> Value {
    for managed in managers.values_mut() {
        if managed.time.is_none() {
            managed.time = Some(now.to_owned());
        }
    }
    cap_updates(&mut managers);
    let mut entries: Vec<(ManagerKey, Managed)> = managers.into_iter().collect();
    entries.sort_by(|(ka, ma), (kb, mb)| {
        ka.operation
            .cmp(&kb.operation)
            .then_with(|| ma.time.cmp(&mb.time))
            .then_with(|| ka.manager.cmp(&kb.manager))
            .then_with(|| ma.api_version.cmp(&mb.api_version))
            .then_with(|| ka.subresource.cmp(&kb.subresource))
    });
    Value::Array(
        entries
            .into_iter()
            .map(|(key, managed)| {
                let mut entry = Map::new();
                entry.insert("manager".into(), json!(key.manager));
                entry.insert("operation".into(), json!(key.operation.as_str()));
                entry.insert("apiVersion".into(), json!(managed.api_version));
                if let Some(time) = managed.time {
                    entry.insert("time".into(), json!(time));
                }
                entry.insert("fieldsType".into(), json!("FieldsV1"));
                entry.insert("fieldsV1".into(), managed.set.to_fields_v1());
                if !key.subresource.is_empty() {
                    entry.insert("subresource".into(), json!(key.subresource));
                }
                Value::Object(entry)
            })
            .collect(),
    )
}

/// Merges the oldest `Update` entries into `ancient-changes` until at most ten are left.
fn cap_updates(managers: &mut Managers) {
    let mut updates: Vec<(ManagerKey, Option<String>)> = managers
        .iter()
        .filter(|(k, _)| k.operation == Operation::Update)
        .map(|(k, m)| (k.clone(), m.time.clone()))
        .collect();
    if updates.len() <= MAX_UPDATE_ENTRIES {
        return;
    }
    updates.sort_by(|a, b| a.1.cmp(&b.1));
    let ancient = ManagerKey {
        manager: ANCIENT_CHANGES.into(),
        operation: Operation::Update,
        subresource: String::new(),
    };
    for (key, _) in updates {
        let count = managers
            .keys()
            .filter(|k| k.operation == Operation::Update)
            .count();
        if count <= MAX_UPDATE_ENTRIES {
            break;
        }
        if key == ancient {
            continue;
        }
        if let Some(old) = managers.remove(&key) {
            let entry = managers.entry(ancient.clone()).or_insert_with(|| Managed {
                set: FieldSet::new(),
                api_version: old.api_version.clone(),
                time: old.time.clone(),
            });
            entry.set.union_with(&old.set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_should_round_trip_sorted_apply_first() {
        let object = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
             "time": "2026-01-02T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "ctl", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:x": {}}}, "subresource": "status"}
        ]}});
        let managers = decode(&object).unwrap();
        assert_eq!(managers.len(), 3);
        let out = encode(managers, "2026-02-01T00:00:00Z");
        let names: Vec<&str> = out
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["kubectl", "ctl", "kubectl-edit"]);
        assert_eq!(out[1]["subresource"], "status");
        assert!(out[0].get("subresource").is_none());
    }

    #[test]
    fn bad_entries_should_not_decode_and_one_empty_entry_should_reset() {
        for bad in [
            json!([{"manager": "m", "operation": "Patch"}]),
            json!([{"manager": "m", "operation": "Update", "fieldsType": "FieldsV2"}]),
            json!([{"manager": "m", "operation": "Update", "fieldsV1": {"spec": {}}}]),
        ] {
            assert!(decode(&json!({"metadata": {"managedFields": bad}})).is_none());
        }
        assert!(is_reset(&json!({"metadata": {"managedFields": [{}]}})));
        assert!(!is_reset(&json!({"metadata": {"managedFields": []}})));
    }

    #[test]
    fn more_than_ten_updaters_should_leave_the_oldest_in_ancient_changes() {
        let mut managers = Managers::new();
        for i in 0..12 {
            let mut set = FieldSet::new();
            set.insert(&["f:data", &format!("f:k{i}")]);
            managers.insert(
                ManagerKey {
                    manager: format!("m{i:02}"),
                    operation: Operation::Update,
                    subresource: String::new(),
                },
                Managed {
                    set,
                    api_version: "v1".into(),
                    time: Some(format!("2026-01-01T00:00:{i:02}Z")),
                },
            );
        }
        let out = encode(managers, "now");
        let entries = out.as_array().unwrap();
        assert_eq!(entries.len(), 10);
        let ancient = entries
            .iter()
            .find(|e| e["manager"] == ANCIENT_CHANGES)
            .unwrap();
        assert_eq!(
            ancient["fieldsV1"],
            json!({"f:data": {"f:k0": {}, "f:k1": {}, "f:k2": {}}})
        );
    }
}
