//! Dry runs validate and answer as the real request would, and change nothing.

use super::*;

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

/// Everything the store holds that a dry run could change: every config map and namespace,
/// each with its resourceVersion. (Not the store's revision: the server's own loops — API
/// Priority and Fairness' status, RBAC's bootstrap — write meanwhile.)
async fn store_state(api: &Api) -> (Value, Value) {
    let (_, cms) = call(api, "GET", "/api/v1/configmaps", JSON, "").await;
    let (_, nss) = call(api, "GET", "/api/v1/namespaces", JSON, "").await;
    (cms["items"].clone(), nss["items"].clone())
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
async fn a_dry_run_finalize_should_not_remove_a_released_namespace() {
    // Regression (issue 15): `PUT namespaces/{name}/finalize?dryRun=All` emptying the
    // finalizers of a terminating namespace removed the namespace for real.
    let api = api().await;
    let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"going"}}"#;
    let (status, _) = call(&api, "POST", "/api/v1/namespaces", JSON, ns).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, marked) = call(&api, "DELETE", "/api/v1/namespaces/going", JSON, "").await;
    assert_eq!(status, StatusCode::OK, "{marked}");
    assert_eq!(marked["status"]["phase"], "Terminating", "{marked}");
    let released = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"going"},"spec":{"finalizers":[]}}"#;
    let finalize = "/api/v1/namespaces/going/finalize";
    let (status, answer) = call(
        &api,
        "PUT",
        &format!("{finalize}?dryRun=All"),
        JSON,
        released,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, still) = call(&api, "GET", "/api/v1/namespaces/going", JSON, "").await;
    assert_eq!(status, StatusCode::OK, "{still}");
    assert_eq!(
        still["spec"]["finalizers"],
        json!(["kubernetes"]),
        "{still}"
    );
    // For real, it goes.
    let (status, _) = call(&api, "PUT", finalize, JSON, released).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&api, "GET", "/api/v1/namespaces/going", JSON, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
