//! RBAC (issue 19, Authorization): every request is authorized by the chain
//! `[system:masters → node authorizer → RBAC]` after authentication; refusals are
//! kube-apiserver's 403 `Status`; the default policy is there at start. Driven in-process with
//! `Handler::handle` as any user.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use setpoint_apiserver::{Api, Handler, User};
use setpoint_store::{EmbeddedConfig, EmbeddedStore};

async fn api() -> Arc<Api> {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory()).unwrap();
    Api::new(Arc::new(store)).await.unwrap()
}

fn user(name: &str, groups: &[&str]) -> User {
    User::new(name, groups.iter().map(|g| (*g).to_owned()))
}

/// Sends `method uri` with `body` as `who`.
async fn call(api: &Api, who: &User, method: &str, uri: &str, body: Value) -> (StatusCode, Value) {
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = Handler::handle(api, request, who.clone()).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Polls `call` until it answers `want` (the authorizer follows the watch caches).
async fn eventually(
    api: &Api,
    who: &User,
    method: &str,
    uri: &str,
    body: Value,
    want: StatusCode,
) -> Value {
    let mut last = (StatusCode::OK, Value::Null);
    for _ in 0..400 {
        last = call(api, who, method, uri, body.clone()).await;
        if last.0 == want {
            return last.1;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "{method} {uri} as {}: wanted {want}, last {last:?}",
        who.name
    );
}

fn admin() -> User {
    user("setpoint-admin", &["system:masters"])
}

#[tokio::test]
async fn requests_should_be_refused_unless_a_binding_allows_them() {
    let api = api().await;
    let jane = user("jane", &[]);
    let (status, body) = call(
        &api,
        &jane,
        "GET",
        "/api/v1/namespaces/default/pods",
        Value::Null,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"",
            "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403})
    );
    let (status, body) = call(&api, &jane, "GET", "/metrics", Value::Null).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "forbidden: User \"jane\" cannot get path \"/metrics\""
    );
    // Every authenticated user may discover the API and read /version (system:discovery,
    // system:public-info-viewer).
    eventually(&api, &jane, "GET", "/version", Value::Null, StatusCode::OK).await;
    assert_eq!(
        call(&api, &jane, "GET", "/apis", Value::Null).await.0,
        StatusCode::OK
    );
    // The default policy exists.
    let (status, role) = call(
        &api,
        &admin(),
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin",
        Value::Null,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "true"
    );

    // A RoleBinding to view rules in `default` lets jane list there, not create, not elsewhere.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "jane-view", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:aggregate-to-view"},
        "subjects": [{"kind": "User", "name": "jane"}]});
    let rbs = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    assert_eq!(
        call(&api, &admin(), "POST", rbs, binding).await.0,
        StatusCode::CREATED
    );
    eventually(
        &api,
        &jane,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
        StatusCode::OK,
    )
    .await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let (status, body) = call(
        &api,
        &jane,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        cm,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "configmaps is forbidden: User \"jane\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(
        call(
            &api,
            &jane,
            "GET",
            "/api/v1/namespaces/kube-system/configmaps",
            Value::Null
        )
        .await
        .0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(
            &api,
            &jane,
            "GET",
            "/api/v1/namespaces/default/secrets",
            Value::Null
        )
        .await
        .0,
        StatusCode::FORBIDDEN
    );
    // Deleting the binding takes the permission away.
    assert_eq!(
        call(
            &api,
            &admin(),
            "DELETE",
            &format!("{rbs}/jane-view"),
            Value::Null
        )
        .await
        .0,
        StatusCode::OK
    );
    eventually(
        &api,
        &jane,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
        StatusCode::FORBIDDEN,
    )
    .await;
}
