//! How discovery advertises `metrics.k8s.io/v1beta1` (what metrics-server registers through
//! its APIService): `nodes` (cluster-scoped `NodeMetrics`) and `pods` (namespaced
//! `PodMetrics`), verbs `get` and `list`, in the legacy documents and in aggregated discovery.
//! `kubectl top` looks for the group there before it asks for metrics.

use serde_json::{json, Value};

/// The group.
pub(crate) const GROUP: &str = "metrics.k8s.io";
/// Its only version.
pub(crate) const VERSION: &str = "v1beta1";
/// What both resources allow.
pub(super) const VERBS: &[&str] = &["get", "list"];

/// `(plural, kind, namespaced)` of each resource.
const RESOURCES: [(&str, &str, bool); 2] = [
    ("nodes", "NodeMetrics", false),
    ("pods", "PodMetrics", true),
];

/// The group's entry of `APIGroupList` (`GET /apis`); with `kind` and `apiVersion` it is the
/// `APIGroup` document (`GET /apis/metrics.k8s.io`).
pub(crate) fn api_group() -> Value {
    let version = json!({"groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION});
    json!({"name": GROUP, "versions": [version.clone()], "preferredVersion": version})
}

/// The `APIResourceList` of `GET /apis/metrics.k8s.io/v1beta1`.
pub(super) fn resource_list() -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .map(|(plural, kind, namespaced)| {
            json!({
                "name": plural,
                "singularName": kind.to_ascii_lowercase(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": VERBS,
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": resources,
    })
}

/// The group's item of an aggregated `APIGroupDiscoveryList` (`GET /apis`).
pub(crate) fn aggregated_group() -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .map(|(plural, kind, namespaced)| {
            json!({
                "resource": plural,
                "responseKind": {"group": GROUP, "version": VERSION, "kind": kind},
                "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": kind.to_ascii_lowercase(),
                "verbs": VERBS,
            })
        })
        .collect();
    json!({
        "metadata": {"name": GROUP, "creationTimestamp": null},
        "versions": [{"version": VERSION, "resources": resources, "freshness": "Current"}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_should_list_nodes_cluster_scoped_and_pods_namespaced() {
        let list = resource_list();
        assert_eq!(list["groupVersion"], "metrics.k8s.io/v1beta1");
        assert_eq!(list["resources"][0]["name"], "nodes");
        assert_eq!(list["resources"][0]["namespaced"], false);
        assert_eq!(list["resources"][1]["kind"], "PodMetrics");
        assert_eq!(list["resources"][1]["verbs"], json!(["get", "list"]));
        let aggregated = aggregated_group();
        assert_eq!(aggregated["metadata"]["name"], "metrics.k8s.io");
        assert_eq!(
            aggregated["versions"][0]["resources"][1]["scope"],
            "Namespaced"
        );
        assert_eq!(api_group()["preferredVersion"]["version"], "v1beta1");
    }
}
