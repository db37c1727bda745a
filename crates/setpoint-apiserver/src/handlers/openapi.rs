//! Serving the OpenAPI documents (`openapi/docs.rs` generates them): `/openapi/v3`, its
//! group-version documents, and `/openapi/v2` as protobuf. The `/openapi/v3` index also lists
//! the group-versions of aggregated APIServices, whose documents are proxied to their servers
//! (`handlers/mod.rs`); `/openapi/v2` adds their servers' definitions.

use http::{header, HeaderValue, Response, StatusCode};
use setpoint_core::{ApiError, Reason};

use super::response::{self, Body};
use crate::openapi::{OpenApiDocs, V2_PROTOBUF_ACCEPT, V2_PROTOBUF_CONTENT_TYPE};

/// Answers a request under `/openapi/`, or `None` if the path is not a document.
/// `/openapi/v2` is served only as protobuf, so a client that does not ask for it gets a
/// 406.
pub(crate) fn serve(
    docs: &OpenApiDocs,
    path: &str,
    accept: Option<&str>,
    aggregated: impl FnOnce() -> Vec<(String, String)>,
    aggregated_v2: impl FnOnce(&bytes::Bytes) -> Option<bytes::Bytes>,
) -> Result<Option<Response<Body>>, ApiError> {
    let path = path.trim_end_matches('/');
    if path == "/openapi/v3" {
        let aggregated = aggregated();
        if aggregated.is_empty() {
            return Ok(Some(response::json_bytes(
                StatusCode::OK,
                docs.index().clone(),
            )));
        }
        let mut index: serde_json::Value =
            serde_json::from_slice(docs.index()).unwrap_or_else(|_| serde_json::json!({}));
        for (gv, url) in aggregated {
            index["paths"][gv] = serde_json::json!({"serverRelativeURL": url});
        }
        return Ok(Some(response::json(StatusCode::OK, &index)));
    }
    if let Some(gv) = path.strip_prefix("/openapi/v3/") {
        let Some(doc) = docs.group_version(gv) else {
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
                format!(
                    "/openapi/v2 is served only as {V2_PROTOBUF_ACCEPT}; use /openapi/v3 for JSON"
                ),
            ));
        }
        let document = aggregated_v2(docs.v2()).unwrap_or_else(|| docs.v2().clone());
        let mut r = Response::new(response::full(document));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(V2_PROTOBUF_CONTENT_TYPE),
        );
        return Ok(Some(r));
    }
    Ok(None)
}
