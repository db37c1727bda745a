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
    let labelled = |i: usize| if i.is_multiple_of(3) { "x" } else { "y" };
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

/// A store whose first list of the ConfigMaps (the watch cache loading) waits until the test
/// opens the gate: the window between a start and the cache being loaded, held open.
struct GatedStore {
    inner: EmbeddedStore,
    first: std::sync::atomic::AtomicBool,
    gate: tokio::sync::Semaphore,
}

#[async_trait::async_trait]
impl setpoint_store::Store for GatedStore {
    async fn current_revision(&self) -> setpoint_store::Result<setpoint_core::Revision> {
        self.inner.current_revision().await
    }
    async fn get(&self, key: &[u8]) -> setpoint_store::Result<Option<setpoint_store::KeyValue>> {
        self.inner.get(key).await
    }
    async fn list(
        &self,
        request: setpoint_store::ListRequest,
    ) -> setpoint_store::Result<setpoint_store::ListResult> {
        if request.prefix.starts_with(b"/registry/configmaps/")
            && !self.first.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let _open = self.gate.acquire().await;
        }
        self.inner.list(request).await
    }
    async fn count(&self, prefix: &[u8]) -> setpoint_store::Result<u64> {
        self.inner.count(prefix).await
    }
    async fn create(
        &self,
        key: Bytes,
        value: Bytes,
    ) -> setpoint_store::Result<setpoint_store::KeyValue> {
        self.inner.create(key, value).await
    }
    async fn update(
        &self,
        key: Bytes,
        value: Bytes,
        expected: Option<setpoint_core::Revision>,
    ) -> setpoint_store::Result<setpoint_store::KeyValue> {
        self.inner.update(key, value, expected).await
    }
    async fn delete(
        &self,
        key: Bytes,
        expected: Option<setpoint_core::Revision>,
    ) -> setpoint_store::Result<setpoint_store::Event> {
        self.inner.delete(key, expected).await
    }
    async fn watch(
        &self,
        prefix: Bytes,
        after: setpoint_core::Revision,
    ) -> setpoint_store::Result<setpoint_store::WatchStream> {
        self.inner.watch(prefix, after).await
    }
    async fn compact(&self, revision: setpoint_core::Revision) -> setpoint_store::Result<()> {
        self.inner.compact(revision).await
    }
}

/// A server started over a store that already holds objects (a restart), whose ConfigMap cache
/// has not loaded yet: a list is served from the store (every object, `200`), a watch is told
/// to come back (`429`, `Retry-After: 1`) — never a 5xx or a wait — and `/readyz` fails; once
/// the cache has loaded, `/readyz` says ok and both are served from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_should_serve_lists_from_the_store_until_the_cache_is_loaded() {
    use setpoint_apiserver::Handler as _;
    use setpoint_store::Store as _;
    const N: usize = 500;
    let store = Arc::new(GatedStore {
        inner: EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap(),
        first: std::sync::atomic::AtomicBool::new(false),
        gate: tokio::sync::Semaphore::new(0),
    });
    for i in 0..N {
        let key = format!("/registry/configmaps/default/r{i:05}");
        let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("r{i:05}"), "namespace": "default",
                         "uid": format!("00000000-0000-0000-0000-{i:012}"),
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": {"k": "v"}});
        store
            .inner
            .create(Bytes::from(key), Bytes::from(value.to_string()))
            .await
            .unwrap();
    }
    let api = Api::new(store.clone()).await.unwrap();
    let readyz = |api: Arc<Api>| async move {
        api.health_checks("readyz")
            .await
            .into_iter()
            .filter_map(|(name, result)| result.err().map(|e| format!("{name}: {e}")))
            .collect::<Vec<_>>()
    };
    let watch = |api: Arc<Api>| async move {
        let request = Request::builder()
            .uri(format!("{CM}?watch=1"))
            .body(Bytes::new())
            .unwrap();
        let response = tokio::time::timeout(std::time::Duration::from_secs(5), api.handle(request))
            .await
            .expect("a watch answers at once");
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status(), retry_after)
    };
    let list_all = |api: Arc<Api>| async move {
        let (status, list) = call(&api, "GET", CM, JSON, "").await;
        assert_eq!(status, StatusCode::OK, "{list}");
        list["items"].as_array().map(Vec::len)
    };

    // The cache is loading (held at the gate).
    let failing = readyz(api.clone()).await;
    assert!(
        failing.iter().any(|f| f.contains("configmaps")),
        "/readyz while the ConfigMaps' cache loads: {failing:?}"
    );
    assert_eq!(
        list_all(api.clone()).await,
        Some(N),
        "served from the store"
    );
    assert_eq!(
        watch(api.clone()).await,
        (StatusCode::TOO_MANY_REQUESTS, Some("1".to_owned()))
    );
    let (status, page) = call(&api, "GET", &format!("{CM}?limit=100"), JSON, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["items"].as_array().map(Vec::len), Some(100));

    // Loaded.
    store.gate.add_permits(1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !readyz(api.clone()).await.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "/readyz never said ok"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(list_all(api.clone()).await, Some(N));
    assert_eq!(watch(api.clone()).await.0, StatusCode::OK);
}
