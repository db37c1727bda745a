//! Discovery: the legacy documents (`APIVersions`, `APIGroupList`, `APIGroup`,
//! `APIResourceList`) and aggregated discovery (`APIGroupDiscoveryList`), negotiated by
//! `Accept` exactly as kube-apiserver does: the first aggregated version the client lists that
//! we serve (`v2`, then `v2beta1`), with its exact `Content-Type`; otherwise legacy JSON.
//! `/apis` lists the registry's groups and then `metrics.k8s.io`, which the registry does not
//! hold (its own documents are served by the `metrics` module).

use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::response::{self, Body};
use super::Api;
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

/// `GET /apis`.
pub(super) fn groups(api: &Api, accept: Option<&str>) -> Response<Body> {
    let served = api.served();
    let named = served
        .registry
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty());
    if let Some(v) = negotiate(accept) {
        let items: Vec<Value> = named
            .map(|(g, vs)| group_discovery(api, g, vs))
            .chain([super::metrics::aggregated_group()])
            .collect();
        return aggregated_response(
            v,
            json!({"kind": "APIGroupDiscoveryList", "metadata": {}, "items": items}),
        );
    }
    let groups: Vec<Value> = named
        .map(|(g, vs)| api_group(g, vs))
        .chain([super::metrics::api_group()])
        .collect();
    response::json(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

fn not_found() -> ApiError {
    ApiError::no_such_path()
}

/// `GET /apis/{group}`.
pub(super) fn group(api: &Api, group: &str) -> Result<Response<Body>, ApiError> {
    let served = api.served();
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
