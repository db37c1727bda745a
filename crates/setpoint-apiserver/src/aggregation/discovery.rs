//! What aggregated API servers serve, for discovery: per APIService with a Service, its
//! group-version's entry of aggregated discovery (`APIVersionDiscovery`: resources, verbs,
//! scope, subresources), fetched from the server's aggregated `/apis` document — or, if it
//! has none, built from its legacy `/apis/{group}/{version}` list. Fetched by the availability
//! checks (never on a client's request) and kept; when a check fails, the entry stays and is
//! marked `Stale`, as kube-apiserver shows it; an APIService never fetched is listed without
//! resources, `Stale` (`aggregation::discovered`).

use std::collections::HashMap;

use serde_json::{json, Value};

/// The `Accept` asking for aggregated discovery (v2, then v2beta1).
pub(crate) const AGGREGATED_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// One group-version's discovery, as last fetched.
#[derive(Clone, Debug)]
pub(crate) struct Fetched {
    /// The `APIVersionDiscovery` entry (`version`, `resources`), without `freshness`.
    pub(crate) entry: Value,
    /// Whether the last check succeeded.
    pub(crate) fresh: bool,
}

/// The entries by APIService name.
#[derive(Default)]
pub(crate) struct Cache {
    entries: parking_lot::Mutex<HashMap<String, Fetched>>,
}

impl Cache {
    /// Stores what was fetched for `apiservice`.
    pub(crate) fn store(&self, apiservice: &str, entry: Value) {
        self.entries
            .lock()
            .insert(apiservice.to_owned(), Fetched { entry, fresh: true });
    }

    /// Marks the entry of `apiservice` stale (its server failed a check).
    pub(crate) fn mark_stale(&self, apiservice: &str) {
        if let Some(f) = self.entries.lock().get_mut(apiservice) {
            f.fresh = false;
        }
    }

    /// Forgets APIServices not in `keep`.
    pub(crate) fn retain(&self, keep: &[String]) {
        self.entries.lock().retain(|name, _| keep.contains(name));
    }

    /// The entry of `apiservice`, with its `freshness`.
    pub(crate) fn get(&self, apiservice: &str) -> Option<Value> {
        let f = self.entries.lock().get(apiservice)?.clone();
        let mut entry = f.entry;
        entry["freshness"] = json!(if f.fresh { "Current" } else { "Stale" });
        Some(entry)
    }
}

/// The entry of `group`/`version` in an aggregated `/apis` document (`APIGroupDiscoveryList`).
pub(crate) fn from_aggregated(doc: &Value, group: &str, version: &str) -> Option<Value> {
    let item = doc["items"]
        .as_array()?
        .iter()
        .find(|i| i["metadata"]["name"] == group)?;
    let entry = item["versions"]
        .as_array()?
        .iter()
        .find(|v| v["version"] == version)?;
    let mut entry = entry.clone();
    if let Some(o) = entry.as_object_mut() {
        o.remove("freshness");
    }
    Some(entry)
}

/// The entry built from a legacy `APIResourceList` of `group`/`version`: subresources
/// (`flunders/status`) are attached to their resource.
pub(crate) fn from_legacy(list: &Value, group: &str, version: &str) -> Option<Value> {
    let items = list["resources"].as_array()?;
    let mut resources: Vec<Value> = Vec::new();
    for r in items {
        let name = r["name"].as_str().unwrap_or_default();
        if name.contains('/') {
            continue;
        }
        let mut out = json!({
            "resource": name,
            "responseKind": {"group": r["group"].as_str().unwrap_or(group),
                "version": r["version"].as_str().unwrap_or(version), "kind": r["kind"]},
            "scope": if r["namespaced"] == Value::Bool(true) { "Namespaced" } else { "Cluster" },
            "singularResource": r["singularName"],
            "verbs": r["verbs"],
        });
        for field in ["shortNames", "categories"] {
            if r[field].as_array().is_some_and(|a| !a.is_empty()) {
                out[field] = r[field].clone();
            }
        }
        let subresources: Vec<Value> = items
            .iter()
            .filter_map(|s| {
                let (parent, sub) = s["name"].as_str()?.split_once('/')?;
                (parent == name).then(|| {
                    json!({"subresource": sub,
                        "responseKind": {"group": s["group"].as_str().unwrap_or(group),
                            "version": s["version"].as_str().unwrap_or(version), "kind": s["kind"]},
                        "verbs": s["verbs"]})
                })
            })
            .collect();
        if !subresources.is_empty() {
            out["subresources"] = json!(subresources);
        }
        resources.push(out);
    }
    Some(json!({"version": version, "resources": resources}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_list_should_become_an_aggregated_entry() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "wardle.example.com/v1",
            "resources": [
                {"name": "flunders", "singularName": "flunder", "namespaced": true,
                 "kind": "Flunder", "verbs": ["get", "list"], "shortNames": ["fl"]},
                {"name": "flunders/status", "singularName": "", "namespaced": true,
                 "kind": "Flunder", "verbs": ["get"]}]});
        let e = from_legacy(&list, "wardle.example.com", "v1").unwrap();
        assert_eq!(e["resources"][0]["resource"], "flunders");
        assert_eq!(e["resources"][0]["scope"], "Namespaced");
        assert_eq!(e["resources"][0]["shortNames"], json!(["fl"]));
        assert_eq!(
            e["resources"][0]["subresources"][0]["subresource"],
            "status"
        );
        assert_eq!(e["resources"].as_array().unwrap().len(), 1);
        let cache = Cache::default();
        cache.store("v1.wardle.example.com", e);
        assert_eq!(
            cache.get("v1.wardle.example.com").unwrap()["freshness"],
            "Current"
        );
        cache.mark_stale("v1.wardle.example.com");
        assert_eq!(
            cache.get("v1.wardle.example.com").unwrap()["freshness"],
            "Stale"
        );
        let doc = json!({"items": [{"metadata": {"name": "wardle.example.com"},
            "versions": [{"version": "v1", "resources": [], "freshness": "Current"}]}]});
        let found = from_aggregated(&doc, "wardle.example.com", "v1").unwrap();
        assert!(found.get("freshness").is_none());
        assert!(from_aggregated(&doc, "wardle.example.com", "v2").is_none());
    }
}
