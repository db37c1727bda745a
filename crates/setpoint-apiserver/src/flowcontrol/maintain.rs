//! Keeps the API Priority and Fairness objects: at start, creates each default FlowSchema and
//! PriorityLevelConfiguration that is missing and rewrites the spec of those annotated
//! `apf.kubernetes.io/autoupdate-spec: "true"` whose spec drifted from the default; then, for
//! as long as the API lives, keeps every FlowSchema's `Dangling` condition true to whether its
//! priority level exists (checked when either cache moves, at most once a second).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use setpoint_core::{ApiError, Reason};

use super::defaults::{self, AUTO_UPDATE};
use crate::api::Api;
use crate::registry::store::{RegistryStore, Scope};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";
/// How often the caches' revisions are looked at.
const PERIOD: Duration = Duration::from_secs(1);

/// Ensures the default objects, then keeps the FlowSchemas' status in a task. Errors are
/// logged: requests are still classified with the mandatory objects.
pub(crate) async fn start(api: &Arc<Api>) {
    let (Ok(schemas), Ok(levels)) = (
        api.registry_store_of(GROUP, "v1", "flowschemas"),
        api.registry_store_of(GROUP, "v1", "prioritylevelconfigurations"),
    ) else {
        return;
    };
    for (store, objects) in [
        (&levels, defaults::level_values()),
        (&schemas, defaults::schema_values()),
    ] {
        for object in objects {
            if let Err(error) = ensure(store, object).await {
                tracing::warn!(%error, "cannot create or update a default flow-control object");
            }
        }
    }
    let weak = Arc::downgrade(api);
    tokio::spawn(async move {
        let mut seen = (0, 0);
        loop {
            let Some(api) = weak.upgrade() else { return };
            let (Ok(schemas), Ok(levels)) = (
                api.registry_store_of(GROUP, "v1", "flowschemas"),
                api.registry_store_of(GROUP, "v1", "prioritylevelconfigurations"),
            ) else {
                return;
            };
            if schemas.cache().is_stopped() {
                return;
            }
            let now = (
                schemas.cache().revision().get(),
                levels.cache().revision().get(),
            );
            if now != seen && schemas.cache().is_ready() && levels.cache().is_ready() {
                match mark_dangling(&schemas, &levels).await {
                    Ok(()) => seen = now,
                    Err(error) => tracing::debug!(%error, "cannot update FlowSchema status"),
                }
            }
            drop(api);
            tokio::time::sleep(PERIOD).await;
        }
    });
}

/// Creates `object` if missing; rewrites its spec if it is auto-updated and has drifted.
async fn ensure(store: &RegistryStore, object: Value) -> Result<(), ApiError> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match store.create(None, object.clone(), false).await {
        Ok(_) => return Ok(()),
        Err(e) if e.reason == Reason::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let wanted = object["spec"].clone();
    store
        .update(None, &name, Scope::Main, false, &|current| {
            let auto = current["metadata"]["annotations"][AUTO_UPDATE].as_str() == Some("true");
            let mut next = current.clone();
            if auto && !contains(&current["spec"], &wanted) {
                next["spec"] = wanted.clone();
            }
            Ok(next)
        })
        .await
        .map(|_| ())
}

/// Whether `have` holds everything `want` says (fields the server defaulted are not compared).
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| h.get(k).is_some_and(|hv| contains(hv, v))),
        (Value::Array(h), Value::Array(w)) => {
            h.len() == w.len() && h.iter().zip(w).all(|(hv, wv)| contains(hv, wv))
        }
        _ => have == want,
    }
}

/// Sets each FlowSchema's `Dangling` condition where it is not already right.
async fn mark_dangling(schemas: &RegistryStore, levels: &RegistryStore) -> Result<(), ApiError> {
    let level_names: Vec<String> = levels
        .cache()
        .snapshot()
        .0
        .values()
        .filter_map(|o| serde_json::from_slice::<Value>(&o.json.bytes()).ok())
        .filter_map(|v| v["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let objects: Vec<Value> = schemas
        .cache()
        .snapshot()
        .0
        .values()
        .filter_map(|o| serde_json::from_slice(&o.json.bytes()).ok())
        .collect();
    for schema in objects {
        let Some(name) = schema["metadata"]["name"].as_str() else {
            continue;
        };
        let level = schema["spec"]["priorityLevelConfiguration"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let dangling = !level_names.contains(&level);
        if condition_is(&schema, dangling) {
            continue;
        }
        let result = schemas
            .update(None, name, Scope::Status, false, &|current| {
                let mut next = current.clone();
                if !condition_is(current, dangling) {
                    set_condition(&mut next, &level, dangling);
                }
                Ok(next)
            })
            .await;
        match result {
            Ok(_) => {}
            Err(e) if e.reason == Reason::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether `schema`'s `Dangling` condition already says `dangling`.
fn condition_is(schema: &Value, dangling: bool) -> bool {
    let want = if dangling { "True" } else { "False" };
    schema["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Dangling" && c["status"] == want)
}

/// Replaces `schema`'s `Dangling` condition.
fn set_condition(schema: &mut Value, level: &str, dangling: bool) {
    let condition = if dangling {
        json!({
            "type": "Dangling", "status": "True", "reason": "NotFound",
            "message": format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object"),
        })
    } else {
        json!({
            "type": "Dangling", "status": "False", "reason": "Found",
            "message": format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists"),
        })
    };
    let mut condition = condition;
    condition["lastTransitionTime"] =
        json!(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string());
    let mut conditions: Vec<Value> = schema["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["type"] != "Dangling")
        .collect();
    conditions.push(condition);
    if !schema["status"].is_object() {
        schema["status"] = json!({});
    }
    schema["status"]["conditions"] = Value::Array(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_with_server_defaults_should_still_contain_the_default() {
        let want = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5}});
        let have = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "borrowingLimitPercent": 0}});
        assert!(contains(&have, &want));
        assert!(!contains(&want, &have));
        let changed = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 6}});
        assert!(!contains(&changed, &want));
    }
}
