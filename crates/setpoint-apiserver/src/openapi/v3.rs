//! OpenAPI v3: the index at `/openapi/v3` and one document per group-version, as kubectl
//! reads them (`kubectl@v0.33.0:pkg/cmd/util/factory_client_access.go`,
//! `cli-runtime@v0.33.0:pkg/resource/query_param_verifier_v3.go`, `pkg/cmd/apply/patcher.go`,
//! `pkg/explain/v2`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::operation::{Method, Operation, Payload};
use super::params::Location;
use super::paths::paths;
use super::schema::{components, gvk_object, reference};
use super::OpenApiResource;

/// `info.version` of every document: the Kubernetes API version Setpoint speaks.
pub(super) const API_VERSION: &str = "v1.33.0";

/// The document of `GET /openapi/v3`: for each `(group, version)`, the URL of its document
/// (`/openapi/v3/api/v1?hash=…` for the core group, `/openapi/v3/apis/<group>/<version>?hash=…`
/// otherwise). kubectl fetches the documents through those URLs and caches them by URL, so
/// `hash` must change whenever a document does.
pub(crate) fn v3_index(group_versions: &[(String, String)], hash: &str) -> Value {
    let paths: Map<String, Value> = group_versions
        .iter()
        .map(|(group, version)| {
            let key = if group.is_empty() {
                format!("api/{version}")
            } else {
                format!("apis/{group}/{version}")
            };
            let url = json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}") });
            (key, url)
        })
        .collect();
    json!({ "paths": paths })
}

/// The document of `GET /openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`: the
/// operations of the given resources that belong to that group-version (others are skipped)
/// and every schema they reference.
pub(crate) fn v3_group_version(group: &str, version: &str, resources: &[OpenApiResource]) -> Value {
    let served: Vec<&OpenApiResource> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    let mut items = Map::new();
    for (path, ops) in paths(served.iter().copied()) {
        let item: Map<String, Value> = ops
            .iter()
            .map(|op| (op.method.as_str().to_owned(), operation(op)))
            .collect();
        items.insert(path, Value::Object(item));
    }
    let paths = Value::Object(items);
    let schemas: Map<String, Value> = components(served, &paths).into_iter().collect();
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": API_VERSION },
        "paths": paths,
        "components": { "schemas": schemas },
    })
}

fn operation(op: &Operation) -> Value {
    let parameters: Vec<Value> = op
        .params
        .iter()
        .map(|p| {
            let mut param = json!({
                "name": p.name,
                "in": if p.location == Location::Path { "path" } else { "query" },
                "description": p.description,
                "schema": { "type": p.ty.as_str(), "uniqueItems": true },
            });
            if p.location == Location::Path {
                param["required"] = true.into();
            }
            param
        })
        .collect();
    let responses: Map<String, Value> = op
        .responses
        .iter()
        .map(|(code, payload)| {
            let schema = match payload {
                Payload::Definition(name) => reference(name),
                Payload::Text => json!({ "type": "string" }),
            };
            let content: Map<String, Value> = op
                .produces
                .iter()
                .map(|&media| (media.to_owned(), json!({ "schema": schema })))
                .collect();
            (
                code.to_string(),
                json!({ "description": reason(*code), "content": content }),
            )
        })
        .collect();
    let mut value = json!({
        "description": op.description,
        "operationId": op.id,
        "parameters": parameters,
        "responses": responses,
        "x-kubernetes-action": op.action.as_str(),
        "x-kubernetes-group-version-kind": gvk_object(&op.gvk.group, &op.gvk.version, &op.gvk.kind),
    });
    if let Some(body) = &op.body {
        let content: BTreeMap<&str, Value> = body
            .content_types
            .iter()
            .map(|&media| (media, json!({ "schema": reference(&body.definition) })))
            .collect();
        // A DELETE body (`DeleteOptions`) is optional.
        value["requestBody"] =
            json!({ "content": content, "required": op.method != Method::Delete });
    }
    value
}

/// The reason phrase of the status codes operations answer with.
pub(super) fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_should_point_at_each_group_version_with_the_hash() {
        let index = v3_index(
            &[("".into(), "v1".into()), ("apps".into(), "v1".into())],
            "H1",
        );
        assert_eq!(
            index,
            json!({"paths": {
                "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=H1"},
                "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=H1"},
            }})
        );
    }
}
