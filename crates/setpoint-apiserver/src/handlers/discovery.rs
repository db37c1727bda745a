//! Discovery: the legacy documents (`APIVersions`, `APIGroupList`, `APIGroup`,
//! `APIResourceList`) and aggregated discovery (`APIGroupDiscoveryList`), negotiated by
//! `Accept` exactly as kube-apiserver does: the first aggregated version the client lists that
//! we serve (`v2`, then `v2beta1`), with its exact `Content-Type`; otherwise legacy JSON.
//! `/apis` lists the registry's groups and then `metrics.k8s.io`, which the registry does not
//! hold (its own documents are served by the `metrics` module), with the groups of aggregated
//! APIServices (`aggregation/`) merged in by their priorities; their versions' resources come
//! from the aggregated servers' own discovery, fetched by the availability checks.

use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::response::{self, Body};
use super::Api;
use crate::aggregation::{self, RemoteGroup};
use crate::registry::ResourceDef;

/// Which aggregated discovery version to answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggregated {
    V2,
    V2Beta1,
}

fn negotiate(accept: Option<&str>) -> Option<Aggregated> {
    for media in accept.unwrap_or("").split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        let has = |p: &str| params.contains(&p);
        if params.first() == Some(&"application/json")
            && has("g=apidiscovery.k8s.io")
            && has("as=APIGroupDiscoveryList")
        {
            if has("v=v2") {
                return Some(Aggregated::V2);
            }
            if has("v=v2beta1") {
                return Some(Aggregated::V2Beta1);
            }
        }
        if params.first() == Some(&"application/json") || params.first() == Some(&"*/*") {
            // A plain entry before any aggregated one we serve: legacy wins.
            if !has("g=apidiscovery.k8s.io") {
                return None;
            }
        }
    }
    None
}

fn aggregated_response(version: Aggregated, body: Value) -> Response<Body> {
    let (av, ct) = match version {
        Aggregated::V2 => (
            "apidiscovery.k8s.io/v2",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        ),
        Aggregated::V2Beta1 => (
            "apidiscovery.k8s.io/v2beta1",
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
        ),
    };
    let mut body = body;
    body["apiVersion"] = json!(av);
    let mut r = response::json(StatusCode::OK, &body);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}

fn resource_discovery(def: &ResourceDef) -> Value {
    let subresources: Vec<Value> = def
        .subresources
        .iter()
        .map(|s| {
            json!({
                "subresource": s.name,
                "responseKind": {"group": s.kind.group, "version": s.kind.version, "kind": s.kind.kind},
                "verbs": s.verbs,
            })
        })
        .collect();
    let mut r = json!({
        "resource": def.plural,
        "responseKind": {"group": def.gvk.group, "version": def.gvk.version, "kind": def.gvk.kind},
        "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": def.singular,
        "verbs": def.verbs,
    });
    if !def.short_names.is_empty() {
        r["shortNames"] = json!(def.short_names);
    }
    if !def.categories.is_empty() {
        r["categories"] = json!(def.categories);
    }
    if !subresources.is_empty() {
        r["subresources"] = json!(subresources);
    }
    r
}

fn group_discovery(api: &Api, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = api
                .served()
                .registry
                .group_version(group, v)
                .into_iter()
                .map(|d| resource_discovery(d))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
}

/// `GET /api`.
pub(super) fn core_group(api: &Api, accept: Option<&str>) -> Response<Body> {
    if let Some(v) = negotiate(accept) {
        let served = api.served();
        let items: Vec<Value> = served
            .registry
            .groups()
            .iter()
            .filter(|(g, _)| g.is_empty())
            .map(|(g, vs)| group_discovery(api, g, vs))
            .collect();
        return aggregated_response(
            v,
            json!({"kind": "APIGroupDiscoveryList", "metadata": {}, "items": items}),
        );
    }
    response::json(
        StatusCode::OK,
        &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}),
    )
}

fn api_group(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0]})
}

/// `GET /apis`: the groups served here, then `metrics.k8s.io`, with the groups of aggregated
/// APIServices merged in (`merge_legacy`, `merge_aggregated`).
pub(super) fn groups(api: &Api, accept: Option<&str>) -> Response<Body> {
    let served = api.served();
    let named = served
        .registry
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty());
    let remote = aggregation::remote_groups(api);
    if let Some(v) = negotiate(accept) {
        let mut items: Vec<(String, Value)> = named
            .map(|(g, vs)| (g.clone(), group_discovery(api, g, vs)))
            .chain([(METRICS_GROUP.to_owned(), super::metrics::aggregated_group())])
            .collect();
        merge_aggregated(api, &mut items, &remote);
        let items: Vec<Value> = items.into_iter().map(|(_, item)| item).collect();
        return aggregated_response(
            v,
            json!({"kind": "APIGroupDiscoveryList", "metadata": {}, "items": items}),
        );
    }
    let mut groups: Vec<(String, Vec<String>)> = named
        .cloned()
        .chain([(METRICS_GROUP.to_owned(), vec!["v1beta1".to_owned()])])
        .collect();
    merge_legacy(api, &mut groups, &remote);
    let groups: Vec<Value> = groups.iter().map(|(g, vs)| api_group(g, vs)).collect();
    response::json(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// The group `metrics.k8s.io`, served beside the registry.
const METRICS_GROUP: &str = "metrics.k8s.io";

/// Where a group of priority `priority` not served here goes among `names`: before the first
/// one of lower priority (kube-apiserver orders `/apis` by priority).
fn position<'a>(
    api: &Api,
    names: impl Iterator<Item = &'a String>,
    priority: i64,
) -> Option<usize> {
    let mut names = names;
    names.position(|n| aggregation::local::group_priority(api, n) < priority)
}

/// Merges aggregated groups into the legacy list: a group also served here lists the
/// aggregated versions first (they override its own of the same name); another is placed by
/// its priority. Every APIService counts, available or not, as in kube-apiserver.
fn merge_legacy(api: &Api, groups: &mut Vec<(String, Vec<String>)>, remote: &[RemoteGroup]) {
    for rg in remote {
        let mut versions: Vec<String> = rg.versions.iter().map(|r| r.version.clone()).collect();
        if let Some((_, local)) = groups.iter_mut().find(|(n, _)| *n == rg.name) {
            versions.extend(
                local
                    .iter()
                    .filter(|v| !versions.contains(v))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            *local = versions;
        } else {
            let at =
                position(api, groups.iter().map(|(n, _)| n), rg.priority).unwrap_or(groups.len());
            groups.insert(at, (rg.name.clone(), versions));
        }
    }
}

/// Merges aggregated groups into aggregated discovery: each version as its server's discovery
/// last said (`freshness: Stale` when its last check failed; without resources if its server
/// was never reached), as kube-apiserver lists them.
fn merge_aggregated(api: &Api, items: &mut Vec<(String, Value)>, remote: &[RemoteGroup]) {
    for rg in remote {
        let entries: Vec<Value> = rg
            .versions
            .iter()
            .map(|r| aggregation::discovered(api, r))
            .collect();
        if let Some((_, item)) = items.iter_mut().find(|(n, _)| *n == rg.name) {
            let local: Vec<Value> = item["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| {
                    !rg.versions
                        .iter()
                        .any(|r| v["version"] == r.version.as_str())
                })
                .cloned()
                .collect();
            item["versions"] = json!(entries.into_iter().chain(local).collect::<Vec<_>>());
        } else {
            let at =
                position(api, items.iter().map(|(n, _)| n), rg.priority).unwrap_or(items.len());
            let item = json!({"metadata": {"name": rg.name, "creationTimestamp": null},
                "versions": entries});
            items.insert(at, (rg.name.clone(), item));
        }
    }
    items.retain(|(_, item)| item["versions"].as_array().is_some_and(|v| !v.is_empty()));
}

fn not_found() -> ApiError {
    ApiError::no_such_path()
}

/// `GET /apis/{group}`: a group with aggregated APIServices lists their versions first.
pub(super) fn group(api: &Api, group: &str) -> Result<Response<Body>, ApiError> {
    let served = api.served();
    if let Some(rg) = aggregation::remote_groups(api)
        .into_iter()
        .find(|g| g.name == group)
    {
        let mut groups: Vec<(String, Vec<String>)> = served
            .registry
            .groups()
            .iter()
            .filter(|(g, _)| g == group)
            .cloned()
            .collect();
        merge_legacy(api, &mut groups, &[rg]);
        let (g, vs) = groups.first().ok_or_else(not_found)?;
        let mut body = api_group(g, vs);
        body["kind"] = json!("APIGroup");
        body["apiVersion"] = json!("v1");
        return Ok(response::json(StatusCode::OK, &body));
    }
    let (g, vs) = served
        .registry
        .groups()
        .iter()
        .find(|(g, _)| g == group && !g.is_empty())
        .ok_or_else(not_found)?;
    let mut body = api_group(g, vs);
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Ok(response::json(StatusCode::OK, &body))
}

/// `GET /api/v1`, `GET /apis/{group}/{version}`.
pub(super) fn group_version(
    api: &Api,
    group: &str,
    version: &str,
) -> Result<Response<Body>, ApiError> {
    let served = api.served();
    let defs = served.registry.group_version(group, version);
    if defs.is_empty() {
        return Err(not_found());
    }
    let mut resources = Vec::new();
    for d in defs {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.gvk.kind,
            "verbs": d.verbs,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        for s in &d.subresources {
            let mut sr = json!({
                "name": format!("{}/{}", d.plural, s.name),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": s.kind.kind,
                "verbs": s.verbs,
            });
            if s.kind.group != d.gvk.group || s.kind.version != d.gvk.version {
                sr["group"] = json!(s.kind.group);
                sr["version"] = json!(s.kind.version);
            }
            resources.push(sr);
        }
    }
    let gv = setpoint_core::api_version(group, version);
    Ok(response::json(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_should_follow_the_clients_order() {
        let k133 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        let k127 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(k133)), Some(Aggregated::V2));
        assert_eq!(negotiate(Some(k127)), Some(Aggregated::V2Beta1));
        assert_eq!(negotiate(Some("application/json")), None);
        assert_eq!(negotiate(None), None);
    }
}
