//! Serving the OpenAPI documents: generated once from the registry when the API starts (they
//! change only when the served resources do), each with a content hash in the v3 index so
//! kubectl's cache notices a change.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use super::response::{self, Body};
use setpoint_core::{ApiError, Reason};

use crate::openapi::{self, OpenApiResource, V2_PROTOBUF_ACCEPT, V2_PROTOBUF_CONTENT_TYPE};
use crate::registry::Registry;

/// The documents, serialized.
pub(crate) struct OpenApiDocs {
    /// `GET /openapi/v3`.
    index: Bytes,
    /// `GET /openapi/v3/<path>`, by path (`api/v1`, `apis/apps/v1`).
    group_versions: BTreeMap<String, Bytes>,
    /// `GET /openapi/v2` (protobuf).
    v2: Bytes,
}

impl OpenApiDocs {
    /// Generates every document for the registry's resources.
    pub(crate) fn generate(registry: &Registry) -> OpenApiDocs {
        let resources: Vec<OpenApiResource> = registry
            .all()
            .map(|d| OpenApiResource {
                group: d.gvk.group.clone(),
                version: d.gvk.version.clone(),
                kind: d.gvk.kind.clone(),
                plural: d.plural.clone(),
                namespaced: d.namespaced,
                subresources: d.subresources.iter().map(|s| s.name.to_owned()).collect(),
                verbs: d.verbs.iter().map(|v| (*v).to_owned()).collect(),
                schema: match d.strategy.openapi_schema() {
                    Some(schema) => schema.clone(),
                    None => openapi::builtin_schema(&d.gvk.group, &d.gvk.version, &d.gvk.kind)
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                },
            })
            .collect();
        let mut gvs: Vec<(String, String)> = resources
            .iter()
            .map(|r| (r.group.clone(), r.version.clone()))
            .collect();
        gvs.sort();
        gvs.dedup();
        let mut group_versions = BTreeMap::new();
        let mut hasher = 0u32;
        for (g, v) in &gvs {
            let doc = openapi::v3_group_version(g, v, &resources);
            let bytes = Bytes::from(serde_json::to_vec(&doc).expect("serializes"));
            hasher = crc32c::crc32c_append(hasher, &bytes);
            let path = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            group_versions.insert(path, bytes);
        }
        let hash = format!("{hasher:08X}");
        let index = serde_json::to_vec(&openapi::v3_index(&gvs, &hash)).expect("serializes");
        OpenApiDocs {
            index: Bytes::from(index),
            group_versions,
            v2: Bytes::from(openapi::v2_protobuf(&resources)),
        }
    }

    /// Answers a request under `/openapi/`, or `None` if the path is not a document.
    /// `/openapi/v2` is served only as protobuf, so a client that does not ask for it gets a
    /// 406.
    pub(crate) fn serve(
        &self,
        path: &str,
        accept: Option<&str>,
    ) -> Result<Option<Response<Body>>, ApiError> {
        let path = path.trim_end_matches('/');
        if path == "/openapi/v3" {
            return Ok(Some(response::json_bytes(
                StatusCode::OK,
                self.index.clone(),
            )));
        }
        if let Some(gv) = path.strip_prefix("/openapi/v3/") {
            let Some(doc) = self.group_versions.get(gv) else {
                return Ok(None);
            };
            let mut r = response::json_bytes(StatusCode::OK, doc.clone());
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, immutable"),
            );
            return Ok(Some(r));
        }
        if path == "/openapi/v2" || path == "/swagger-2.0.0.pb-v1" {
            let wants_protobuf = accept.is_some_and(|a| {
                a.contains(V2_PROTOBUF_ACCEPT) || a.contains(V2_PROTOBUF_CONTENT_TYPE)
            }) || path == "/swagger-2.0.0.pb-v1";
            if !wants_protobuf {
                return Err(ApiError::new(
                    Reason::NotAcceptable,
                    format!("/openapi/v2 is served only as {V2_PROTOBUF_ACCEPT}; use /openapi/v3 for JSON"),
                ));
            }
            let mut r = Response::new(response::full(self.v2.clone()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(V2_PROTOBUF_CONTENT_TYPE),
            );
            return Ok(Some(r));
        }
        Ok(None)
    }
}
