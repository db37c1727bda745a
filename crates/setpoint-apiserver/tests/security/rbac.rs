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

    // A RoleBinding to `view` in `default` lets jane list there, not create, not elsewhere.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "jane-view", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
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

/// A ClusterRole or Role object.
fn role(kind: &str, name: &str, namespace: Option<&str>, rules: Value) -> Value {
    let mut meta = json!({"name": name});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules})
}

/// A binding of the ClusterRole `role` to the user `who`.
fn bind(kind: &str, name: &str, namespace: Option<&str>, role: &str, who: &str) -> Value {
    let mut meta = json!({"name": name});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "name": who}]})
}

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

#[tokio::test]
async fn edit_should_not_read_rbac_and_escalation_should_be_refused() {
    let api = api().await;
    let ed = user("ed", &["devs"]);
    let binding = bind("RoleBinding", "ed-edit", Some("default"), "edit", "ed");
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/namespaces/default/rolebindings"),
            binding
        )
        .await
        .0,
        StatusCode::CREATED
    );
    // `edit` writes workloads and reads secrets, never roles or bindings.
    eventually(
        &api,
        &ed,
        "GET",
        "/api/v1/namespaces/default/secrets",
        Value::Null,
        StatusCode::OK,
    )
    .await;
    let (status, body) = call(
        &api,
        &ed,
        "GET",
        &format!("{RBAC}/namespaces/default/roles"),
        Value::Null,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "roles.rbac.authorization.k8s.io is forbidden: User \"ed\" cannot list resource \"roles\" in API group \"rbac.authorization.k8s.io\" in the namespace \"default\""
    );

    // A user who may only create roles cannot create one granting more than it holds.
    let creator = role(
        "ClusterRole",
        "role-creator",
        None,
        json!([{"verbs": ["create"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"]},
        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]),
    );
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/clusterroles"),
            creator
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let binding = bind("RoleBinding", "rc", Some("default"), "role-creator", "rc");
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/namespaces/default/rolebindings"),
            binding
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let rc = user("rc", &[]);
    let roles = format!("{RBAC}/namespaces/default/roles");
    let modest = role(
        "Role",
        "modest",
        Some("default"),
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]),
    );
    eventually(&api, &rc, "POST", &roles, modest, StatusCode::CREATED).await;
    let greedy = role(
        "Role",
        "greedy",
        Some("default"),
        json!([{"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods", "secrets"]}]),
    );
    let (status, body) = call(&api, &rc, "POST", &roles, greedy).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["message"],
        "roles.rbac.authorization.k8s.io \"greedy\" is forbidden: user \"rc\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"
    );
    // Binding a role it does not hold is refused too, unless it may `bind` it.
    let can_bind = role(
        "ClusterRole",
        "binder",
        None,
        json!([{"verbs": ["create"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"]}]),
    );
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/clusterroles"),
            can_bind
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let binding = bind("RoleBinding", "rc-binder", Some("default"), "binder", "rc");
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/namespaces/default/rolebindings"),
            binding
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let rbs = format!("{RBAC}/namespaces/default/rolebindings");
    let to_admin = bind("RoleBinding", "rc-admin", Some("default"), "admin", "rc");
    let modest_binding = bind(
        "RoleBinding",
        "rc-view-pods",
        Some("default"),
        "role-creator",
        "someone",
    );
    eventually(&api, &rc, "POST", &rbs, modest_binding, StatusCode::CREATED).await;
    let (status, body) = call(&api, &rc, "POST", &rbs, to_admin.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["message"].as_str().unwrap().starts_with(
            "rolebindings.rbac.authorization.k8s.io \"rc-admin\" is forbidden: user \"rc\""
        ),
        "{body}"
    );
    let may_bind = role(
        "ClusterRole",
        "may-bind-admin",
        None,
        json!([{"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["admin"]}]),
    );
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/clusterroles"),
            may_bind
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let binding = bind(
        "ClusterRoleBinding",
        "rc-may-bind",
        None,
        "may-bind-admin",
        "rc",
    );
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/clusterrolebindings"),
            binding
        )
        .await
        .0,
        StatusCode::CREATED
    );
    eventually(&api, &rc, "POST", &rbs, to_admin, StatusCode::CREATED).await;
}

#[tokio::test]
async fn aggregation_and_access_reviews_should_follow_rbac() {
    let api = api().await;
    // A custom role labelled to aggregate into `view` is gathered into it.
    let crons = role(
        "ClusterRole",
        "crontabs-view",
        None,
        json!([{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["crontabs"]}]),
    );
    let mut crons = crons;
    crons["metadata"]["labels"] = json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"});
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/clusterroles"),
            crons
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let mut gathered = false;
    for _ in 0..400 {
        let (_, view) = call(
            &api,
            &admin(),
            "GET",
            &format!("{RBAC}/clusterroles/view"),
            Value::Null,
        )
        .await;
        if view["rules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["resources"] == json!(["crontabs"])))
        {
            gathered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(gathered, "view did not aggregate crontabs-view");
    let (_, edit) = call(
        &api,
        &admin(),
        "GET",
        &format!("{RBAC}/clusterroles/edit"),
        Value::Null,
    )
    .await;
    assert!(edit["rules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["resources"]
            .as_array()
            .unwrap()
            .contains(&json!("secrets"))));

    // Access reviews answer with the real authorizer.
    let binding = bind("RoleBinding", "vic-view", Some("default"), "view", "vic");
    assert_eq!(
        call(
            &api,
            &admin(),
            "POST",
            &format!("{RBAC}/namespaces/default/rolebindings"),
            binding
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let vic = user("vic", &[]);
    let review = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": verb, "resource": resource}}})
    };
    let ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let mut answer = Value::Null;
    for _ in 0..400 {
        answer = call(&api, &vic, "POST", ssar, review("list", "pods"))
            .await
            .1;
        if answer["status"]["allowed"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        answer["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"vic-view/default\" of ClusterRole \"view\" to User \"vic\""})
    );
    assert_eq!(
        call(&api, &vic, "POST", ssar, review("create", "pods"))
            .await
            .1["status"],
        json!({"allowed": false})
    );
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "vic", "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "secrets"}}});
    let (status, body) = call(
        &api,
        &admin(),
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar,
    )
    .await;
    assert_eq!(
        (status, &body["status"]["allowed"]),
        (StatusCode::CREATED, &json!(false))
    );
    let lsar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "metadata": {"namespace": "kube-system"},
        "spec": {"user": "vic", "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}});
    let (status, _) = call(
        &api,
        &admin(),
        "POST",
        "/apis/authorization.k8s.io/v1/namespaces/kube-system/localsubjectaccessreviews",
        lsar,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let ssrr = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}});
    let (_, rules) = call(
        &api,
        &vic,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        ssrr,
    )
    .await;
    let resource_rules = rules["status"]["resourceRules"].as_array().unwrap();
    assert!(
        resource_rules
            .iter()
            .any(|r| r["resources"].as_array().unwrap().contains(&json!("pods"))),
        "{rules}"
    );
    assert!(
        !resource_rules.iter().any(|r| r["resources"]
            .as_array()
            .unwrap()
            .contains(&json!("secrets"))),
        "{rules}"
    );
    assert!(rules["status"]["nonResourceRules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["nonResourceURLs"]
            .as_array()
            .unwrap()
            .contains(&json!("/version"))));
    assert_eq!(rules["status"]["incomplete"], false);
}
