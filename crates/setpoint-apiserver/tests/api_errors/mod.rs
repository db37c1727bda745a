//! Bad input gets a `Status` with the right code and reason — never a 500 for a client's
//! mistake. Driven through `Api::handle` on an in-memory store (no HTTP needed: the transport's
//! own limits are tested in `request_limits.rs`). `pod_stream/` also runs the stream
//! subresources' upgrade proxy through the transport to a fake node agent.

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

mod bad_requests;
mod crd_rules;
mod dry_run;
mod fuzz;
mod lists_and_watches;
mod pod_stream;
mod validation;
mod wire_format;

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use setpoint_apiserver::Api;
use setpoint_store::{EmbeddedConfig, EmbeddedStore};

async fn api() -> Arc<Api> {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap();
    Api::new(Arc::new(store)).await.unwrap()
}

async fn call(
    api: &Api,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Bytes::from(body.to_owned()))
        .unwrap();
    let response = api.handle(request).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

/// Waits until `collection` is served (a CRD's resource is registered by a loop).
async fn eventually_served(api: &Api, collection: &str) {
    for _ in 0..200 {
        if call(api, "GET", collection, JSON, "").await.0 == StatusCode::OK {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{collection} was not served within 5 s");
}

/// Checks the code and reason of a `Status` answer.
fn expect(got: &(StatusCode, Value), code: u16, reason: &str) {
    assert_eq!(got.0.as_u16(), code, "{}", got.1);
    assert_eq!(got.1["kind"], "Status", "{}", got.1);
    assert_eq!(got.1["code"], code, "{}", got.1);
    assert_eq!(got.1["reason"], reason, "{}", got.1);
}

const CM: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";

/// The raw answer: status and body text, for checks of the exact bytes.
async fn call_text(
    api: &Api,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, String) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Bytes::from(body.to_owned()))
        .unwrap();
    let response = api.handle(request).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn create_cm(api: &Api, name: &str) -> (StatusCode, Value) {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    call(api, "POST", CM, JSON, &body.to_string()).await
}
