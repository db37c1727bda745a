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

/// Everything the store holds that a dry run could change: every config map and namespace
/// (each with its resourceVersion), and the store's revision.
async fn store_state(api: &Api) -> (Value, Value, Value) {
    let (_, cms) = call(api, "GET", "/api/v1/configmaps", JSON, "").await;
    let (_, nss) = call(api, "GET", "/api/v1/namespaces", JSON, "").await;
    (
        cms["items"].clone(),
        nss["items"].clone(),
        cms["metadata"]["resourceVersion"].clone(),
    )
}

/// Creates config maps `a` (label tier=x) and `b` in `ns`, `ns` first if not `default`.
async fn seed(api: &Api, ns: &str) {
    if ns != "default" {
        let body =
            format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#);
        let (status, _) = call(api, "POST", "/api/v1/namespaces", JSON, &body).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    for (name, labels) in [("a", r#"{"tier":"x"}"#), ("b", "{}")] {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{labels}}},"data":{{"k":"v"}}}}"#
        );
        let uri = format!("/api/v1/namespaces/{ns}/configmaps");
        assert_eq!(
            call(api, "POST", &uri, JSON, &body).await.0,
            StatusCode::CREATED
        );
    }
}

#[tokio::test]
async fn a_dry_run_create_should_change_nothing() {
    // Regression (issue 14.1): a server dry run must never write.
    let api = api().await;
    seed(&api, "default").await;
    let before = store_state(&api).await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"}}"#;
    let (status, created) = call(&api, "POST", &format!("{CM}?dryRun=All"), JSON, body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["name"], "new");
    assert_eq!(store_state(&api).await, before);
}

#[tokio::test]
async fn a_dry_run_update_should_change_nothing_and_answer_the_current_version() {
    // Regression (issue 14.1): a server dry run must never write; (issue 14.9): its answer had
    // no resourceVersion, which `kubectl diff` showed as removed.
    let api = api().await;
    seed(&api, "default").await;
    let before = store_state(&api).await;
    let (_, current) = call(&api, "GET", &format!("{CM}/a"), JSON, "").await;
    let mut changed = current.clone();
    changed["data"]["k"] = json!("changed");
    for rv in [current["metadata"]["resourceVersion"].clone(), Value::Null] {
        changed["metadata"]["resourceVersion"] = rv;
        let (status, answer) = call(
            &api,
            "PUT",
            &format!("{CM}/a?dryRun=All"),
            JSON,
            &changed.to_string(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["data"]["k"], "changed");
        assert_eq!(
            answer["metadata"]["resourceVersion"], current["metadata"]["resourceVersion"],
            "{answer}"
        );
    }
    assert_eq!(store_state(&api).await, before);
}

#[tokio::test]
async fn a_dry_run_patch_should_change_nothing_and_answer_the_current_version() {
    // Regression (issue 14.1): a server dry run must never write; (issue 14.9): its answer had
    // no resourceVersion, which `kubectl diff` showed as removed.
    let api = api().await;
    seed(&api, "default").await;
    let before = store_state(&api).await;
    let (_, current) = call(&api, "GET", &format!("{CM}/a"), JSON, "").await;
    for (content_type, patch) in [
        (
            "application/merge-patch+json",
            r#"{"data":{"k":"patched"}}"#,
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"data":{"k":"patched"}}"#,
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/data/k","value":"patched"}]"#,
        ),
    ] {
        let (status, answer) = call(
            &api,
            "PATCH",
            &format!("{CM}/a?dryRun=All"),
            content_type,
            patch,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["data"]["k"], "patched");
        assert_eq!(
            answer["metadata"]["resourceVersion"], current["metadata"]["resourceVersion"],
            "{content_type}: {answer}"
        );
    }
    assert_eq!(store_state(&api).await, before);
}

#[tokio::test]
async fn a_dry_run_delete_should_leave_the_object_whether_asked_in_the_body_or_the_query() {
    // Regression (issue 14.1): kubectl sends dryRun in the DeleteOptions body, which was
    // ignored: `kubectl delete --dry-run=server` deleted for real.
    let api = api().await;
    seed(&api, "default").await;
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["x/y"]},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"i"}]}}"#;
    let pods = "/api/v1/namespaces/default/pods";
    assert_eq!(
        call(&api, "POST", pods, JSON, pod).await.0,
        StatusCode::CREATED
    );
    let before = store_state(&api).await;
    let (_, pod_before) = call(&api, "GET", &format!("{pods}/p"), JSON, "").await;
    for (query, body) in [
        ("", r#"{"propagationPolicy":"Background","dryRun":["All"]}"#),
        ("?dryRun=All", ""),
        ("?dryRun=All", r#"{"propagationPolicy":"Foreground"}"#),
        (
            "",
            r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"],"gracePeriodSeconds":0}"#,
        ),
    ] {
        let (status, answer) = call(&api, "DELETE", &format!("{CM}/a{query}"), JSON, body).await;
        assert_eq!(status, StatusCode::OK, "{query} {body}: {answer}");
        let (status, answer) = call(&api, "DELETE", &format!("{pods}/p{query}"), JSON, body).await;
        assert_eq!(status, StatusCode::OK, "{query} {body}: {answer}");
        assert_eq!(
            answer["metadata"]["resourceVersion"],
            pod_before["metadata"]["resourceVersion"]
        );
    }
    assert_eq!(store_state(&api).await, before);
    let (_, pod_after) = call(&api, "GET", &format!("{pods}/p"), JSON, "").await;
    assert_eq!(pod_after, pod_before);
    expect(
        &call(
            &api,
            "DELETE",
            &format!("{CM}/a"),
            JSON,
            r#"{"dryRun":["Some"]}"#,
        )
        .await,
        422,
        "Invalid",
    );
}

#[tokio::test]
async fn a_dry_run_deletecollection_should_leave_every_object() {
    // Regression (issue 14.1): a dry-run DELETECOLLECTION (and one with its options in the
    // body) deleted for real.
    let api = api().await;
    seed(&api, "default").await;
    seed(&api, "other").await;
    let before = store_state(&api).await;
    for (uri, body) in [
        (format!("{CM}?dryRun=All"), ""),
        (
            format!("{CM}?labelSelector=tier%3Dx"),
            r#"{"dryRun":["All"]}"#,
        ),
        (
            CM.to_owned(),
            r#"{"dryRun":["All"],"propagationPolicy":"Background"}"#,
        ),
    ] {
        let (status, answer) = call(&api, "DELETE", &uri, JSON, body).await;
        assert_eq!(status, StatusCode::OK, "{uri} {body}: {answer}");
        assert!(!answer["items"].as_array().unwrap().is_empty(), "{answer}");
    }
    assert_eq!(store_state(&api).await, before);
}

#[tokio::test]
async fn a_dry_run_namespace_delete_should_not_mark_the_namespace() {
    // Regression (issue 14.1): `kubectl delete ns --dry-run=server` set the namespace
    // Terminating, and the namespace loop then deleted everything in it.
    let api = api().await;
    seed(&api, "victim").await;
    let before = store_state(&api).await;
    let (status, answer) = call(
        &api,
        "DELETE",
        "/api/v1/namespaces/victim",
        JSON,
        r#"{"propagationPolicy":"Background","dryRun":["All"]}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(store_state(&api).await, before);
    let (_, ns) = call(&api, "GET", "/api/v1/namespaces/victim", JSON, "").await;
    assert!(ns["metadata"]["deletionTimestamp"].is_null(), "{ns}");
    assert_ne!(ns["status"]["phase"], "Terminating", "{ns}");
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
async fn watch_timeouts_at_their_extremes_should_not_be_500s() {
    // Regression (issue 14.3): `timeoutSeconds=9223372036854775807` overflowed the deadline
    // and answered 500.
    let api = api().await;
    let watch = |timeout: &str| {
        Request::builder()
            .method("GET")
            .uri(format!("{CM}?watch=1&timeoutSeconds={timeout}"))
            .body(Bytes::new())
            .unwrap()
    };
    for huge in ["9223372036854775807", "4611686018427387904", "31536000000"] {
        let response = api.handle(watch(huge)).await;
        assert_eq!(response.status(), StatusCode::OK, "{huge}");
    }
    // A negative timeout ends the watch at once, as kube-apiserver's timer does.
    let response = api.handle(watch("-1")).await;
    assert_eq!(response.status(), StatusCode::OK);
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        response.into_body().collect(),
    )
    .await
    .expect("the watch ends at once")
    .unwrap();
    for bad in ["abc", "9223372036854775808", "1.5"] {
        let got = api.handle(watch(bad)).await;
        assert_eq!(got.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn grace_periods_at_their_extremes_should_not_be_500s() {
    // Regression (issue 14.2): `terminationGracePeriodSeconds: 9223372036854775807` was
    // accepted, then deleting the pod panicked in `Duration::seconds` (500); so did
    // `?gracePeriodSeconds=9223372036854775807`.
    let api = api().await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str, grace: i64| {
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {
                "nodeName": "n1",
                "terminationGracePeriodSeconds": grace,
                "containers": [{"name": "c", "image": "i"}],
            },
        })
        .to_string()
    };
    // kube-apiserver accepts any non-negative grace period, and stores a negative one as 1.
    let (status, created) = call(&api, "POST", pods, JSON, &pod("max", i64::MAX)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["terminationGracePeriodSeconds"], i64::MAX);
    let (status, created) = call(&api, "POST", pods, JSON, &pod("negative", -5)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["terminationGracePeriodSeconds"], 1);

    let (status, deleting) = call(&api, "DELETE", &format!("{pods}/max"), JSON, "").await;
    assert_eq!(status, StatusCode::OK, "{deleting}");
    assert_eq!(deleting["metadata"]["deletionGracePeriodSeconds"], i64::MAX);
    assert_eq!(
        deleting["metadata"]["deletionTimestamp"],
        "9999-12-30T22:00:00Z"
    );

    for (name, query, body, expected) in [
        (
            "q-max",
            "?gracePeriodSeconds=9223372036854775807",
            "",
            i64::MAX,
        ),
        (
            "b-max",
            "",
            r#"{"gracePeriodSeconds":9223372036854775807}"#,
            i64::MAX,
        ),
        ("q-min", "?gracePeriodSeconds=-9223372036854775808", "", 1),
        ("b-neg", "", r#"{"gracePeriodSeconds":-1}"#, 1),
    ] {
        let (status, _) = call(&api, "POST", pods, JSON, &pod(name, 30)).await;
        assert_eq!(status, StatusCode::CREATED);
        let uri = format!("{pods}/{name}{query}");
        let (status, deleting) = call(&api, "DELETE", &uri, JSON, body).await;
        assert_eq!(status, StatusCode::OK, "{name}: {deleting}");
        assert_eq!(
            deleting["metadata"]["deletionGracePeriodSeconds"], expected,
            "{name}: {deleting}"
        );
    }
    expect(
        &call(
            &api,
            "DELETE",
            &format!("{pods}/negative?gracePeriodSeconds=9223372036854775808"),
            JSON,
            "",
        )
        .await,
        400,
        "BadRequest",
    );
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

/// A namespaced CRD `<plural>.example.com` (kind `Thing`, version `v1`) whose `spec` has the
/// list `l` (`list` is its schema) and the rule `rule`.
fn crd_with_rule(plural: &str, list: Value, rule: &str) -> String {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object",
                    "x-kubernetes-validations": [{"rule": rule}],
                    "properties": {"l": list}}}}}}]}})
    .to_string()
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Creates a CRD and waits until its resource is served.
async fn establish(api: &Api, crd: &str, plural: &str) {
    let created = call(api, "POST", CRDS, JSON, crd).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let collection = format!("/apis/example.com/v1/namespaces/default/{plural}");
    for _ in 0..200 {
        if call(api, "GET", &collection, JSON, "").await.0 == StatusCode::OK {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{plural} was never served");
}

fn thing(name: &str, spec: Value) -> String {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec})
        .to_string()
}

#[tokio::test]
async fn a_crd_whose_rules_cost_too_much_should_be_refused() {
    // Regression (issue 14.5): a rule cubic in an unbounded list was accepted, and then each
    // create took half a minute.
    let api = api().await;
    let rule = "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))";
    let unbounded = json!({"type": "array", "items": {"type": "integer"}});
    let got = call(
        &api,
        "POST",
        CRDS,
        JSON,
        &crd_with_rule("cubes", unbounded, rule),
    )
    .await;
    expect(&got, 422, "Invalid");
    let causes = got.1["details"]["causes"].as_array().unwrap();
    let at = "spec.versions[0].schema.openAPIV3Schema";
    assert_eq!(causes[0]["reason"], "FieldValueForbidden", "{}", got.1);
    assert_eq!(
        causes[0]["field"],
        format!("{at}.properties[spec].x-kubernetes-validations[0].rule")
    );
    assert!(
        causes[0]["message"].as_str().unwrap().contains(
            "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        ),
        "{}",
        got.1
    );
    let total = causes.last().unwrap();
    assert_eq!(total["field"], at);
    assert!(total["message"].as_str().unwrap().contains("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x"), "{}", got.1);
    assert_eq!(
        call(&api, "GET", &format!("{CRDS}/cubes.example.com"), JSON, "")
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    // The same rule on a list of at most 10 items is cheap enough.
    let bounded = json!({"type": "array", "maxItems": 10, "items": {"type": "integer"}});
    establish(&api, &crd_with_rule("cubes", bounded, rule), "cubes").await;
    let created = call(
        &api,
        "POST",
        "/apis/example.com/v1/namespaces/default/cubes",
        JSON,
        &thing("c", json!({"l": (0..10).collect::<Vec<i64>>()})),
    )
    .await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
}

#[tokio::test]
async fn a_rule_past_its_call_cost_limit_should_fail_the_request() {
    // Regression (issue 14.5): CEL evaluations had no cost limit at run time. The rule below
    // is estimated under the limits for 500 items, but comparing every pair of 500 items
    // costs more than one evaluation may.
    let api = api().await;
    let rule = "self.l.all(a, self.l.all(b, a + b >= 0))";
    let list = json!({"type": "array", "maxItems": 500, "items": {"type": "integer"}});
    establish(&api, &crd_with_rule("pairs", list, rule), "pairs").await;
    let things = "/apis/example.com/v1/namespaces/default/pairs";
    let small = thing("small", json!({"l": [1, 2, 3]}));
    let created = call(&api, "POST", things, JSON, &small).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let large = thing("large", json!({"l": (0..500).collect::<Vec<i64>>()}));
    let got = call(&api, "POST", things, JSON, &large).await;
    expect(&got, 422, "Invalid");
    let cause = &got.1["details"]["causes"][0];
    assert_eq!(cause["field"], "spec", "{}", got.1);
    assert_eq!(
        cause["message"],
        format!("Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {rule}")
    );
}

#[tokio::test]
async fn a_costly_rule_should_not_hold_up_other_requests() {
    // Regression (issue 14.5): CEL rules ran on the async worker threads, so a costly
    // evaluation stalled every other request (and `/readyz`) until it was done. On this
    // test's single-threaded runtime, another request can only complete while the costly
    // one is still in flight if the rules run elsewhere.
    let api = api().await;
    // Within the limits (about 900 000 per item, as estimated and at run time), but slow:
    // every pair of 330 items is compared, and none matches.
    let rule = "self.l.exists(a, self.l.exists(b, a + b < 0))";
    let list = json!({"type": "array", "maxItems": 330, "items": {"type": "integer"}});
    establish(&api, &crd_with_rule("slows", list, rule), "slows").await;
    let slow = thing("slow", json!({"l": (0..330).collect::<Vec<i64>>()}));
    let in_flight = {
        let api = Arc::clone(&api);
        tokio::spawn(async move {
            let things = "/apis/example.com/v1/namespaces/default/slows";
            call(&api, "POST", things, JSON, &slow).await
        })
    };
    // Let the costly request start.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let listed = call(&api, "GET", "/api/v1/namespaces", JSON, "").await;
    assert_eq!(listed.0, StatusCode::OK);
    assert!(
        !in_flight.is_finished(),
        "the costly request finished before another request could be answered"
    );
    let got = in_flight.await.unwrap();
    expect(&got, 422, "Invalid");
    assert!(
        got.1["message"].as_str().unwrap().contains("failed rule"),
        "{}",
        got.1
    );
}

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

#[tokio::test]
async fn an_unknown_subresource_should_be_a_404_with_empty_details() {
    // Regression (issue 14.7): the 404 for an unknown path or subresource had no `details`,
    // and `kubectl debug` (which reads `Details.Name` of the pods/ephemeralcontainers 404)
    // panicked on the nil pointer. kube-apiserver sends `"details":{}`.
    let api = api().await;
    for (method, path) in [
        (
            "PATCH",
            "/api/v1/namespaces/default/pods/p/ephemeralcontainers",
        ),
        ("GET", "/api/v1/namespaces/default/widgets"),
        ("GET", "/apis/nope.example.com/v1"),
    ] {
        let got = call_text(
            &api,
            method,
            path,
            "application/strategic-merge-patch+json",
            "{}",
        )
        .await;
        assert_eq!(got.0, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            got.1,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the server could not find the requested resource\",\"reason\":\"NotFound\",\"details\":{},\"code\":404}\n",
            "{path}"
        );
    }
}

#[tokio::test]
async fn status_bodies_should_have_kube_apiservers_field_order_and_details() {
    // Regression (issue 14.11a): Status keys came out alphabetically with no trailing newline;
    // kube-apiserver writes `kind, apiVersion, metadata, status, message, reason, details, code`
    // and ends every JSON body with a newline (the Python client's tests compare the text).
    let api = api().await;
    let missing = call_text(&api, "GET", &format!("{CM}/nope"), JSON, "").await;
    assert_eq!(
        missing.1,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"kind\":\"configmaps\"},\"code\":404}\n"
    );
    let missing_deploy = call_text(
        &api,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/web",
        JSON,
        "",
    )
    .await;
    assert!(
        missing_deploy.1.contains(
            r#""details":{"name":"web","group":"apps","kind":"deployments"},"code":404}"#
        ),
        "{}",
        missing_deploy.1
    );
    assert_eq!(create_cm(&api, "c").await.0, StatusCode::CREATED);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let exists = call_text(&api, "POST", CM, JSON, &body.to_string()).await;
    assert_eq!(
        exists.1,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"c\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"c\",\"kind\":\"configmaps\"},\"code\":409}\n"
    );
    let invalid = call_text(
        &api,
        "POST",
        CM,
        JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad"}}"#,
    )
    .await;
    assert!(
        invalid.1.starts_with("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"ConfigMap \\\"Bad\\\" is invalid: metadata.name: Invalid value: \\\"Bad\\\": a lowercase RFC 1123 subdomain"),
        "{}",
        invalid.1
    );
    assert!(
        invalid.1.contains("\"reason\":\"Invalid\",\"details\":{\"name\":\"Bad\",\"kind\":\"ConfigMap\",\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value: \\\"Bad\\\": a lowercase RFC 1123 subdomain"),
        "{}",
        invalid.1
    );
    assert!(
        invalid
            .1
            .ends_with("\"field\":\"metadata.name\"}]},\"code\":422}\n"),
        "{}",
        invalid.1
    );
    // Reasons kube-apiserver sends without details.
    let bad = call_text(&api, "POST", CM, JSON, "{not json").await;
    assert!(
        bad.1.contains("\"reason\":\"BadRequest\",\"code\":400}\n"),
        "{}",
        bad.1
    );
    let media = call_text(&api, "POST", CM, "text/plain", "x").await;
    assert!(
        media
            .1
            .contains("\"reason\":\"UnsupportedMediaType\",\"code\":415}\n"),
        "{}",
        media.1
    );
    // MethodNotAllowed: go-restful's answer for a path without a route for the method.
    let verb = call_text(&api, "PUT", CM, JSON, "{}").await;
    assert!(
        verb.1.ends_with("\"message\":\"the server does not allow this method on the requested resource\",\"reason\":\"MethodNotAllowed\",\"details\":{},\"code\":405}\n"),
        "{}",
        verb.1
    );
    // A verb the resource does not support: apimachinery's NewMethodNotSupported names it.
    let verb = call_text(&api, "DELETE", "/api/v1/namespaces", JSON, "").await;
    assert!(
        verb.1.ends_with(
            "\"reason\":\"MethodNotAllowed\",\"details\":{\"kind\":\"namespaces\"},\"code\":405}\n"
        ),
        "{}",
        verb.1
    );
    // A successful delete answers a Success Status with the object's name, kind and uid.
    let deleted = call_text(&api, "DELETE", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(deleted.0, StatusCode::OK);
    assert!(
        deleted.1.starts_with("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"details\":{\"name\":\"c\",\"kind\":\"configmaps\",\"uid\":\""),
        "{}",
        deleted.1
    );
    assert!(deleted.1.ends_with("\"}}\n"), "{}", deleted.1);
}

#[tokio::test]
async fn objects_and_lists_should_start_with_kind_api_version_and_metadata() {
    // Regression (issue 14.11a): objects came out with alphabetical keys (`apiVersion, data,
    // kind, metadata`) and no trailing newline.
    let api = api().await;
    let body = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","labels":{"a":"b"}},"data":{"k":"v"}}"#;
    let created = call_text(&api, "POST", CM, JSON, body).await;
    assert_eq!(created.0, StatusCode::CREATED);
    assert!(
        created.1.starts_with("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\",\"namespace\":\"default\",\"uid\":"),
        "{}",
        created.1
    );
    assert!(
        created.1.ends_with("},\"data\":{\"k\":\"v\"}}\n"),
        "{}",
        created.1
    );
    let got = call_text(&api, "GET", &format!("{CM}/c"), JSON, "").await;
    assert!(
        got.1.starts_with(
            "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\","
        ),
        "{}",
        got.1
    );
    assert!(got.1.ends_with("}\n"), "{}", got.1);
    let list = call_text(&api, "GET", CM, JSON, "").await;
    assert!(
        list.1.starts_with(
            "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
        ),
        "{}",
        list.1
    );
    assert!(list.1.contains("\"items\":[{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\","), "{}", list.1);
    assert!(list.1.ends_with("]}\n"), "{}", list.1);
}

#[tokio::test]
async fn the_version_document_should_be_written_as_kube_apiserver_writes_it() {
    // Issue 14.11a: `/version` is not written by the API encoder but indented, in
    // `version.Info`'s field order, without a trailing newline.
    let api = api().await;
    let (status, text) = call_text(&api, "GET", "/version", JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.starts_with(
            "{\n  \"major\": \"1\",\n  \"minor\": \"33\",\n  \"gitVersion\": \"v1.33.0-setpoint."
        ),
        "{text}"
    );
    assert!(text.ends_with("\"\n}"), "{text}");
}

#[tokio::test]
async fn creating_a_crd_should_answer_with_its_initial_status() {
    // Regression (issue 14.11b): the answer to creating a CRD had no `status`; kube-apiserver
    // answers with `acceptedNames` and `storedVersions` (kube-rs' crd_api example unwraps it).
    let api = api().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}},
            }],
        },
    });
    let (status, created) = call(
        &api,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        JSON,
        &crd.to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["status"]["storedVersions"],
        json!(["v1"]),
        "{created}"
    );
    assert!(created["status"]["acceptedNames"].is_object(), "{created}");
    let decoded: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(created).unwrap();
    assert!(decoded.status.is_some());
}

#[tokio::test]
async fn subdomain_names_should_allow_253_characters_and_services_dns_1035_labels() {
    // Regression (issue 14.10): ConfigMap names of 64-253 characters were refused with the
    // 63-character DNS label rule. kube-apiserver checks most kinds' names as DNS-1123
    // subdomains, namespaces as DNS-1123 labels and services as DNS-1035 labels.
    let api = api().await;
    let long = "a".repeat(100);
    let (status, body) = create_cm(&api, &long).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        create_cm(&api, &"b".repeat(253)).await.0,
        StatusCode::CREATED
    );
    let too_long = create_cm(&api, &"c".repeat(254)).await;
    expect(&too_long, 422, "Invalid");
    assert!(
        too_long.1["message"]
            .as_str()
            .unwrap()
            .contains("must be no more than 253 characters"),
        "{}",
        too_long.1
    );
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n".repeat(64)}});
    expect(
        &call(&api, "POST", "/api/v1/namespaces", JSON, &ns.to_string()).await,
        422,
        "Invalid",
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1svc"},
        "spec": {"ports": [{"port": 80}]}});
    let got = call(
        &api,
        "POST",
        "/api/v1/namespaces/default/services",
        JSON,
        &svc.to_string(),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .contains("a DNS-1035 label"),
        "{}",
        got.1
    );
}

#[tokio::test]
async fn finalizer_names_should_be_qualified_or_standard() {
    // Regression (issue 14.10): finalizer names were not validated. kube-apiserver wants a
    // qualified name, and on built-in kinds a name without a domain only from its own list.
    let api = api().await;
    let with = |name: &str, finalizers: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "finalizers": finalizers}})
        .to_string()
    };
    let got = call(&api, "POST", CM, JSON, &with("a", json!(["cleanup"]))).await;
    expect(&got, 422, "Invalid");
    assert_eq!(
        got.1["message"],
        "ConfigMap \"a\" is invalid: metadata.finalizers[0]: Invalid value: \"cleanup\": name is neither a standard finalizer name nor is it fully qualified"
    );
    let got = call(
        &api,
        "POST",
        CM,
        JSON,
        &with("b", json!(["example.com/a b"])),
    )
    .await;
    expect(&got, 422, "Invalid");
    let got = call(
        &api,
        "POST",
        CM,
        JSON,
        &with("c", json!(["orphan", "foregroundDeletion"])),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .contains("finalizer orphan and foregroundDeletion cannot be both set"),
        "{}",
        got.1
    );
    let ok = call(
        &api,
        "POST",
        CM,
        JSON,
        &with("d", json!(["example.com/cleanup", "kubernetes"])),
    )
    .await;
    assert_eq!(ok.0, StatusCode::CREATED, "{}", ok.1);
}

#[tokio::test]
async fn a_foreground_delete_should_replace_an_orphan_finalizer() {
    // Issue 14.10: with finalizer validation refusing orphan together with
    // foregroundDeletion, a delete's propagation finalizer must replace the other one (as
    // kube-apiserver's delete does) instead of failing validation.
    let api = api().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "finalizers": ["orphan"]}});
    assert_eq!(
        call(&api, "POST", CM, JSON, &cm.to_string()).await.0,
        StatusCode::CREATED
    );
    let (status, body) = call(
        &api,
        "DELETE",
        &format!("{CM}/c"),
        JSON,
        r#"{"propagationPolicy":"Foreground"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, cm) = call(&api, "GET", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(
        cm["metadata"]["finalizers"],
        json!(["foregroundDeletion"]),
        "{cm}"
    );
}

#[tokio::test]
async fn a_patch_should_not_move_an_object_to_another_namespace_or_name() {
    // Regression (issue 14.10): a merge patch that changed `metadata.namespace` was silently
    // ignored; kube-apiserver refuses it with 400.
    let api = api().await;
    assert_eq!(create_cm(&api, "c").await.0, StatusCode::CREATED);
    let merge = "application/merge-patch+json";
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c"),
        merge,
        r#"{"metadata":{"namespace":"kube-system"}}"#,
    )
    .await;
    expect(&got, 400, "BadRequest");
    assert_eq!(
        got.1["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c"),
        merge,
        r#"{"metadata":{"name":"d"}}"#,
    )
    .await;
    expect(&got, 400, "BadRequest");
    assert_eq!(
        got.1["message"],
        "the name of the object (d) does not match the name on the URL (c)"
    );
    let put = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "kube-system"}});
    expect(
        &call(&api, "PUT", &format!("{CM}/c"), JSON, &put.to_string()).await,
        400,
        "BadRequest",
    );
    let (status, cm) = call(&api, "GET", &format!("{CM}/c"), JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cm["metadata"]["namespace"], "default");
}

#[tokio::test]
async fn config_map_and_secret_data_should_be_at_most_one_mebibyte() {
    // Regression (issue 14.10): a 2 MiB ConfigMap was accepted; kube-apiserver allows 1 MiB of
    // data in a ConfigMap or Secret.
    let api = api().await;
    let big = "x".repeat(2 * 1024 * 1024);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"a": big}});
    let got = call(&api, "POST", CM, JSON, &cm.to_string()).await;
    expect(&got, 422, "Invalid");
    assert_eq!(
        got.1["message"],
        "ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes"
    );
    assert_eq!(got.1["details"]["causes"][0]["reason"], "FieldValueTooLong");
    assert_eq!(got.1["details"]["causes"][0]["field"], "[]");
    let exact = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "max"},
        "data": {"a": "y".repeat(1024 * 1024)}});
    assert_eq!(
        call(&api, "POST", CM, JSON, &exact.to_string()).await.0,
        StatusCode::CREATED
    );
    use base64::Engine as _;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"},
        "data": {"a": base64::engine::general_purpose::STANDARD.encode(vec![0u8; 1024 * 1024 + 1])}});
    let got = call(
        &api,
        "POST",
        "/api/v1/namespaces/default/secrets",
        JSON,
        &secret.to_string(),
    )
    .await;
    expect(&got, 422, "Invalid");
    assert_eq!(
        got.1["message"],
        "Secret \"big\" is invalid: data: Too long: must have at most 1048576 bytes"
    );
}

#[tokio::test]
async fn a_node_without_unschedulable_should_match_spec_unschedulable_false() {
    // Regression (issue 14.11c): `spec.unschedulable=false` did not select a node without the
    // field; kube-apiserver formats the absent bool as `false`.
    let api = api().await;
    for (name, spec) in [
        ("free", json!({})),
        ("cordoned", json!({"unschedulable": true})),
    ] {
        let node =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec});
        let (status, body) = call(&api, "POST", "/api/v1/nodes", JSON, &node.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, schedulable) = call(
        &api,
        "GET",
        "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse",
        JSON,
        "",
    )
    .await;
    assert_eq!(names(&schedulable), ["free"], "{schedulable}");
    let (_, cordoned) = call(
        &api,
        "GET",
        "/api/v1/nodes?fieldSelector=spec.unschedulable!%3Dfalse",
        JSON,
        "",
    )
    .await;
    assert_eq!(names(&cordoned), ["cordoned"], "{cordoned}");
}
