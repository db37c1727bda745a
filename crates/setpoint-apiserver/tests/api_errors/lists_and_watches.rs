//! Lists, watches and delete-collections: expired windows and continue tokens, selectors.

use super::*;

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

#[tokio::test]
async fn pages_should_count_what_remains_and_end_with_the_last_object() {
    let api = api().await;
    let labelled = |i: usize| if i % 3 == 0 { "x" } else { "y" };
    for i in 0..23 {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"p{i:02}","labels":{{"tier":"{}"}}}}}}"#,
            labelled(i)
        );
        assert_eq!(
            call(&api, "POST", CM, JSON, &body).await.0,
            StatusCode::CREATED
        );
    }
    let mut names = Vec::new();
    let mut remaining_seen = Vec::new();
    let mut uri = format!("{CM}?limit=5");
    loop {
        let (status, page) = call(&api, "GET", &uri, JSON, "").await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for item in page["items"].as_array().unwrap() {
            names.push(item["metadata"]["name"].as_str().unwrap().to_owned());
        }
        remaining_seen.push(page["metadata"]["remainingItemCount"].as_u64());
        match page["metadata"]["continue"].as_str() {
            Some(token) => uri = format!("{CM}?limit=5&continue={token}"),
            None => break,
        }
    }
    let expected: Vec<String> = (0..23).map(|i| format!("p{i:02}")).collect();
    assert_eq!(names, expected);
    assert_eq!(
        remaining_seen,
        [Some(18), Some(13), Some(8), Some(3), None],
        "remainingItemCount on each page"
    );
    // A filtered list pages by the selected objects and says nothing of what remains.
    let mut names = Vec::new();
    let mut uri = format!("{CM}?limit=3&labelSelector=tier%3Dx");
    loop {
        let (_, page) = call(&api, "GET", &uri, JSON, "").await;
        assert!(page["metadata"]["remainingItemCount"].is_null());
        for item in page["items"].as_array().unwrap() {
            names.push(item["metadata"]["name"].as_str().unwrap().to_owned());
        }
        match page["metadata"]["continue"].as_str() {
            Some(token) => uri = format!("{CM}?limit=3&labelSelector=tier%3Dx&continue={token}"),
            None => break,
        }
    }
    let expected: Vec<String> = (0..23)
        .filter(|i| labelled(*i) == "x")
        .map(|i| format!("p{i:02}"))
        .collect();
    assert_eq!(names, expected);
}
