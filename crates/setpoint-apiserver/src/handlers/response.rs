//! Building responses: JSON objects, `Status` errors, lists assembled from cached bytes, and
//! the `Table` and metadata-only forms clients ask for with `Accept`.

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{wire, ApiError};

use crate::watchcache::ServedJson;

pub(crate) use crate::server::Body;

/// A body of known bytes.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    crate::server::full_body(bytes)
}

/// A JSON response.
pub(crate) fn json_bytes(status: StatusCode, bytes: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A text answer with `content_type`.
pub(crate) fn text(status: StatusCode, content_type: &'static str, text: String) -> Response<Body> {
    let mut r = Response::new(full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    r
}

/// A JSON response of a value, as kube-apiserver's encoder writes it: fields in its order
/// ([`setpoint_core::wire`]) and a trailing newline.
pub(crate) fn json(status: StatusCode, value: &Value) -> Response<Body> {
    let mut bytes = wire::to_vec(value);
    bytes.push(b'\n');
    json_bytes(status, bytes)
}

/// The `Status` response for an error.
pub(crate) fn error(e: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_bytes(status, e.to_body());
    // A retry period in the details is also a `Retry-After` header, as kube-apiserver sends it.
    if let Some(seconds) = e
        .details
        .as_ref()
        .and_then(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
    {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// What form of objects the client asked for with `Accept`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// The objects themselves.
    Object,
    /// A `meta.k8s.io` `Table` (v1 or v1beta1).
    Table { v1beta1: bool },
    /// `PartialObjectMetadata` (or its list).
    Metadata { v1beta1: bool },
}

/// Reads the preferred form from an `Accept` header: the first listed media type we can serve.
pub(crate) fn form(accept: Option<&str>) -> Form {
    for media in accept.unwrap_or("").split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        let get = |k: &str| {
            params
                .iter()
                .find_map(|p| p.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
        };
        let base = params.first().copied().unwrap_or("");
        if base != "application/json" && base != "*/*" && !base.is_empty() {
            continue;
        }
        match (get("as"), get("g"), get("v")) {
            (Some("Table"), Some("meta.k8s.io"), v) => {
                return Form::Table {
                    v1beta1: v == Some("v1beta1"),
                }
            }
            (
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                v,
            ) => {
                return Form::Metadata {
                    v1beta1: v == Some("v1beta1"),
                }
            }
            (Some(_), _, _) => continue,
            (None, _, _) => return Form::Object,
        }
    }
    Form::Object
}

/// Assembles a list response from already-serialized items, without re-encoding them: the
/// whole body, with kube-apiserver's field order and trailing newline.
pub(crate) fn list_bytes<'a>(
    kind: &str,
    api_version: &str,
    metadata: &Value,
    items: impl Iterator<Item = &'a ServedJson> + Clone,
) -> Bytes {
    let head = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
    let mut head = wire::to_vec(&head);
    head.pop(); // the closing brace
                // One allocation of the exact size: a list of 10,000 objects is megabytes.
    let body: usize = items.clone().map(|i| i.len() + 1).sum();
    let mut out = BytesMut::with_capacity(head.len() + 13 + body);
    out.extend_from_slice(&head);
    out.extend_from_slice(b",\"items\":[");
    let mut first = true;
    for item in items {
        if !first {
            out.extend_from_slice(b",");
        }
        first = false;
        item.write_to(&mut out);
    }
    out.extend_from_slice(b"]}\n");
    out.freeze()
}

/// The metadata-only form of an object.
pub(crate) fn partial_metadata(object: &Value, v1beta1: bool) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": object["metadata"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_should_follow_the_first_servable_accept_entry() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(form(Some(kubectl)), Form::Table { v1beta1: false });
        assert_eq!(
            form(Some("application/vnd.kubernetes.protobuf,application/json")),
            Form::Object
        );
        assert_eq!(form(None), Form::Object);
        assert_eq!(
            form(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Form::Metadata { v1beta1: false }
        );
    }

    #[test]
    fn list_bytes_should_splice_items_verbatim() {
        let items = [
            ServedJson::whole(Bytes::from_static(b"{\"a\":1}")),
            ServedJson::whole(Bytes::from_static(b"{\"b\":2}")),
        ];
        let out = list_bytes(
            "PodList",
            "v1",
            &json!({"resourceVersion": "5"}),
            items.iter(),
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["items"][1]["b"], 2);
        assert_eq!(v["metadata"]["resourceVersion"], "5");
    }
}
