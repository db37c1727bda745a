//! Bad input gets a `Status` with the right code and reason — never a 500 for a client's
//! mistake. Driven through `Api::handle` on an in-memory store (no HTTP needed: the transport's
//! own limits are tested in `request_limits.rs`).

#![allow(clippy::unwrap_used)] // test helpers: a failure should panic with the error

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use setpoint_apiserver::Api;
use setpoint_store::{EmbeddedConfig, EmbeddedStore};

mod fuzz;

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

#[tokio::test]
async fn malformed_bodies_should_be_bad_requests() {
    let api = api().await;
    expect(
        &call(&api, "POST", CM, JSON, "{not json").await,
        400,
        "BadRequest",
    );
    expect(
        &call(&api, "POST", CM, JSON, "[1,2]").await,
        400,
        "BadRequest",
    );
    expect(
        &call(&api, "POST", CM, "application/yaml", "a: [b").await,
        400,
        "BadRequest",
    );
    let wrong_type = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":"x"}"#;
    let got = call(&api, "POST", CM, JSON, wrong_type).await;
    expect(&got, 400, "BadRequest");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .contains("cannot be handled as a ConfigMap"),
        "{}",
        got.1
    );
    let wrong_version = r#"{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"c"}}"#;
    expect(
        &call(&api, "POST", CM, JSON, wrong_version).await,
        400,
        "BadRequest",
    );
    let other_ns = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"kube-system"}}"#;
    expect(
        &call(&api, "POST", CM, JSON, other_ns).await,
        400,
        "BadRequest",
    );
    let strict = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"spec":{}}"#;
    let got = call(
        &api,
        "POST",
        &format!("{CM}?fieldValidation=Strict"),
        JSON,
        strict,
    )
    .await;
    expect(&got, 400, "BadRequest");
    assert_eq!(
        got.1["message"],
        r#"strict decoding error: unknown field "spec""#
    );
    expect(
        &call(
            &api,
            "GET",
            &format!("{CM}?labelSelector=a%20in%20"),
            JSON,
            "",
        )
        .await,
        400,
        "BadRequest",
    );
    expect(
        &call(
            &api,
            "GET",
            &format!("{CM}?fieldSelector=spec.x%3D1"),
            JSON,
            "",
        )
        .await,
        400,
        "BadRequest",
    );
    expect(
        &call(&api, "GET", &format!("{CM}?limit=abc"), JSON, "").await,
        400,
        "BadRequest",
    );
    expect(
        &call(&api, "GET", &format!("{CM}?continue=garbage"), JSON, "").await,
        400,
        "BadRequest",
    );
}

#[tokio::test]
async fn invalid_objects_should_name_the_field() {
    let api = api().await;
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "Bad_Name"},
        "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}}});
    let got = call(
        &api,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        JSON,
        &deploy.to_string(),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert_eq!(got.1["details"]["kind"], "Deployment");
    let fields: Vec<&str> = got.1["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.replicas",
            "spec.template.spec.containers[0].image"
        ]
    );
    let nameless = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#;
    expect(
        &call(&api, "POST", CM, JSON, nameless).await,
        422,
        "Invalid",
    );
}

#[tokio::test]
async fn wrong_verbs_paths_and_media_types_should_say_so() {
    let api = api().await;
    expect(
        &call(&api, "GET", "/api/v1/namespaces/default/widgets", JSON, "").await,
        404,
        "NotFound",
    );
    expect(
        &call(&api, "GET", "/apis/nope/v1", JSON, "").await,
        404,
        "NotFound",
    );
    expect(
        &call(
            &api,
            "GET",
            "/api/v1/namespaces/default/configmaps/c/nope",
            JSON,
            "",
        )
        .await,
        404,
        "NotFound",
    );
    expect(
        &call(&api, "PUT", CM, JSON, "{}").await,
        405,
        "MethodNotAllowed",
    );
    expect(
        &call(&api, "DELETE", "/api/v1/namespaces", JSON, "").await,
        405,
        "MethodNotAllowed",
    );
    expect(
        &call(&api, "POST", CM, "text/plain", "x").await,
        415,
        "UnsupportedMediaType",
    );
    let created = call(
        &api,
        "POST",
        CM,
        JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#,
    )
    .await;
    assert_eq!(created.0, StatusCode::CREATED);
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c?fieldManager=x"),
        "application/apply-patch+yaml",
        "{}",
    )
    .await;
    expect(&got, 415, "UnsupportedMediaType");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .contains("server-side apply"),
        "{}",
        got.1
    );
    expect(
        &call(
            &api,
            "PATCH",
            &format!("{CM}/c"),
            "application/json-patch+json",
            "{",
        )
        .await,
        400,
        "BadRequest",
    );
    let watch = call(
        &api,
        "GET",
        &format!("{CM}?watch=1&sendInitialEvents=true"),
        JSON,
        "",
    )
    .await;
    expect(&watch, 422, "Invalid");
    let list = call(
        &api,
        "GET",
        &format!("{CM}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0"),
        JSON,
        "",
    )
    .await;
    expect(&list, 422, "Invalid");
    expect(
        &call(
            &api,
            "GET",
            &format!("{CM}?resourceVersion=0&resourceVersionMatch=Exact"),
            JSON,
            "",
        )
        .await,
        422,
        "Invalid",
    );
}

#[tokio::test]
async fn conflicts_and_duplicates_should_be_409s_and_change_nothing() {
    let api = api().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}"#;
    let (status, created) = call(&api, "POST", CM, JSON, body).await;
    assert_eq!(status, StatusCode::CREATED);
    expect(
        &call(&api, "POST", CM, JSON, body).await,
        409,
        "AlreadyExists",
    );
    let rv: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut update = created.clone();
    update["data"]["a"] = json!("2");
    update["metadata"]["resourceVersion"] = json!((rv - 1).to_string());
    let got = call(&api, "PUT", &format!("{CM}/c"), JSON, &update.to_string()).await;
    expect(&got, 409, "Conflict");
    assert!(got.1["message"]
        .as_str()
        .unwrap()
        .contains("the object has been modified"));
    let (_, now) = call(&api, "GET", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(now["data"]["a"], "1", "a failed write changed nothing");
    update["metadata"]["resourceVersion"] = json!(rv.to_string());
    let (status, updated) = call(&api, "PUT", &format!("{CM}/c"), JSON, &update.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(updated["data"]["a"], "2");
    let precondition = json!({"preconditions": {"uid": "not-the-uid"}}).to_string();
    expect(
        &call(&api, "DELETE", &format!("{CM}/c"), JSON, &precondition).await,
        409,
        "Conflict",
    );
    let (status, _) = call(&api, "DELETE", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    expect(
        &call(&api, "DELETE", &format!("{CM}/c"), JSON, "").await,
        404,
        "NotFound",
    );
}

#[tokio::test]
async fn dry_run_should_validate_without_storing() {
    let api = api().await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"}}"#;
    let (status, _) = call(&api, "POST", &format!("{CM}?dryRun=All"), JSON, body).await;
    assert_eq!(status, StatusCode::CREATED);
    expect(
        &call(&api, "GET", &format!("{CM}/dry"), JSON, "").await,
        404,
        "NotFound",
    );
    expect(
        &call(&api, "POST", &format!("{CM}?dryRun=Some"), JSON, body).await,
        400,
        "BadRequest",
    );
}

#[tokio::test]
async fn watches_and_continues_older_than_the_window_should_be_expired() {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap();
    let api = Api::with_watch_window(Arc::new(store), 5).await.unwrap();
    let mut first_rv = String::new();
    for i in 0..20 {
        let body =
            format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c{i}"}}}}"#);
        let (status, created) = call(&api, "POST", CM, JSON, &body).await;
        assert_eq!(status, StatusCode::CREATED);
        if i == 0 {
            first_rv = created["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned();
        }
    }
    // Let the cache catch up, then ask for history it no longer keeps.
    let (status, _) = call(&api, "GET", CM, JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    let got = call(
        &api,
        "GET",
        &format!("{CM}?watch=1&resourceVersion={first_rv}"),
        JSON,
        "",
    )
    .await;
    expect(&got, 410, "Expired");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version"),
        "{}",
        got.1
    );
    let (_, page) = call(&api, "GET", &format!("{CM}?limit=5"), JSON, "").await;
    let token = page["metadata"]["continue"].as_str().unwrap().to_owned();
    for i in 20..30 {
        let body =
            format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c{i}"}}}}"#);
        call(&api, "POST", CM, JSON, &body).await;
    }
    call(&api, "GET", CM, JSON, "").await;
    let got = call(
        &api,
        "GET",
        &format!("{CM}?limit=5&continue={token}"),
        JSON,
        "",
    )
    .await;
    expect(&got, 410, "Expired");
}

#[tokio::test]
async fn a_strategic_merge_patch_the_client_got_wrong_should_be_a_400_not_a_500() {
    let api = api().await;
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let path = "/apis/apps/v1/namespaces/default/deployments";
    assert_eq!(
        call(&api, "POST", path, JSON, &deploy.to_string()).await.0,
        StatusCode::CREATED
    );
    // A container without its merge key (`name`).
    let patch = r#"{"spec":{"template":{"spec":{"containers":[{"image":"j"}]}}}}"#;
    let got = call(
        &api,
        "PATCH",
        &format!("{path}/d"),
        "application/strategic-merge-patch+json",
        patch,
    )
    .await;
    expect(&got, 400, "BadRequest");
}

#[tokio::test]
async fn deletecollection_should_delete_only_the_selected_objects() {
    let api = api().await;
    for (name, tier) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"tier":"{tier}"}}}}}}"#
        );
        assert_eq!(
            call(&api, "POST", CM, JSON, &body).await.0,
            StatusCode::CREATED
        );
    }
    let (status, deleted) = call(
        &api,
        "DELETE",
        &format!("{CM}?labelSelector=tier%3Dx"),
        JSON,
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(deleted["kind"], "ConfigMapList");
    assert_eq!(deleted["items"].as_array().unwrap().len(), 2);
    let (_, left) = call(&api, "GET", CM, JSON, "").await;
    let names: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c"]);
}

#[tokio::test]
async fn a_continue_token_from_another_collection_should_be_refused() {
    // Regression: a token whose start key lies outside the listed collection was answered
    // with an empty list (200) instead of an error.
    let api = api().await;
    for i in 0..3 {
        let body =
            format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c{i}"}}}}"#);
        call(
            &api,
            "POST",
            "/api/v1/namespaces/kube-system/configmaps",
            JSON,
            &body,
        )
        .await;
    }
    let (_, page) = call(
        &api,
        "GET",
        "/api/v1/namespaces/kube-system/configmaps?limit=1",
        JSON,
        "",
    )
    .await;
    let token = page["metadata"]["continue"].as_str().unwrap().to_owned();
    let got = call(
        &api,
        "GET",
        &format!("{CM}?limit=1&continue={token}"),
        JSON,
        "",
    )
    .await;
    expect(&got, 400, "BadRequest");
}
