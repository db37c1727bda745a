//! Requests the server cannot take: malformed bodies, wrong verbs, paths and media types,
//! conflicts, patches the client got wrong, values at their extremes, unknown subresources.

use super::*;

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
    // Apply patches: a configuration without apiVersion and kind is a bad request; without
    // a field manager, or with `force` on another patch type, the options are invalid; CBOR
    // is not served.
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c?fieldManager=x"),
        "application/apply-patch+yaml",
        "{}",
    )
    .await;
    expect(&got, 400, "BadRequest");
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c"),
        "application/apply-patch+yaml",
        r#"{"apiVersion":"v1","kind":"ConfigMap"}"#,
    )
    .await;
    expect(&got, 422, "Invalid");
    assert_eq!(
        got.1["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c?force=true"),
        "application/merge-patch+json",
        "{}",
    )
    .await;
    expect(&got, 422, "Invalid");
    let got = call(
        &api,
        "PATCH",
        &format!("{CM}/c?fieldManager=x"),
        "application/apply-patch+cbor",
        "{}",
    )
    .await;
    expect(&got, 415, "UnsupportedMediaType");
    // CBOR is off, as in kube-apiserver without its feature gate: the Status names the patch
    // types that are accepted, and not the CBOR apply patch.
    assert_eq!(
        got.1["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml",
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
async fn deleting_a_namespaced_collection_across_namespaces_should_be_a_405() {
    // Regression (issue 15): `DELETE /api/v1/configmaps` looked each object up under the
    // request's (absent) namespace, found nothing and answered 200 with an empty list;
    // kube-apiserver serves only list and watch there, so it is a 405 and nothing is deleted.
    let api = api().await;
    assert_eq!(create_cm(&api, "kept").await.0, StatusCode::CREATED);
    expect(
        &call(&api, "DELETE", "/api/v1/configmaps", JSON, "").await,
        405,
        "MethodNotAllowed",
    );
    let (status, _) = call(&api, "GET", &format!("{CM}/kept"), JSON, "").await;
    assert_eq!(status, StatusCode::OK);
}
