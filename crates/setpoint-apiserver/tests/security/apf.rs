//! API Priority and Fairness, through `Handler::handle` (what the transport calls once it has
//! authenticated the user): the default FlowSchemas classify each of Setpoint's identities as
//! kube-apiserver's do (seen in the `X-Kubernetes-PF-*` headers), the watch cap per user, and
//! the `Dangling` condition. The queueing itself (429 under a flood, exempt users never queue,
//! the max-in-flight fallback) is tested with seats held directly, in
//! `src/flowcontrol/tests.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{json, Value};
use setpoint_apiserver::{Api, Body, FlowControlSettings, Handler, User};
use setpoint_store::{EmbeddedConfig, EmbeddedStore};
use setpoint_testenv::eventually;

const FLOWCONTROL: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

async fn api() -> Arc<Api> {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory().without_auto_compaction()).unwrap();
    Api::new(Arc::new(store)).await.unwrap()
}

async fn call(
    api: &Api,
    user: &User,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> Response<Body> {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())))
        .unwrap();
    Handler::handle(api, request, user.clone()).await
}

async fn json_of(response: Response<Body>) -> Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

fn admin() -> User {
    User::new("setpoint-admin", ["system:masters".to_owned()])
}

/// The names of the objects of a flowcontrol collection, by uid.
async fn names_by_uid(api: &Api, resource: &str) -> BTreeMap<String, String> {
    let list = json_of(
        call(
            api,
            &admin(),
            "GET",
            &format!("{FLOWCONTROL}/{resource}"),
            None,
        )
        .await,
    )
    .await;
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["uid"].as_str().unwrap().to_owned(),
                o["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn sa(namespace: &str, name: &str) -> User {
    User::new(
        format!("system:serviceaccount:{namespace}:{name}"),
        [
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
        ],
    )
}

#[tokio::test]
async fn default_flow_schemas_should_classify_each_identity_as_kube_does() {
    let api = api().await;
    let schemas = names_by_uid(&api, "flowschemas").await;
    let levels = names_by_uid(&api, "prioritylevelconfigurations").await;
    for expected in [
        "exempt",
        "catch-all",
        "probes",
        "system-nodes",
        "system-node-high",
        "global-default",
    ] {
        assert!(
            schemas.values().any(|n| n == expected),
            "default FlowSchema {expected} missing"
        );
    }
    let node = User::new("system:node:n1", ["system:nodes".to_owned()]);
    let cases = [
        (
            admin(),
            "/api/v1/namespaces/default/configmaps",
            "exempt",
            "exempt",
        ),
        (User::loopback(), "/api/v1/services", "exempt", "exempt"),
        (
            node.clone(),
            "/api/v1/nodes/n1",
            "system-node-high",
            "node-high",
        ),
        (
            node.clone(),
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
            "system-node-high",
            "node-high",
        ),
        (node, "/api/v1/pods", "system-nodes", "system"),
        (
            sa("kube-system", "deployment-controller"),
            "/apis/apps/v1/deployments",
            "kube-system-service-accounts",
            "workload-high",
        ),
        (
            sa("kube-system", "deployment-controller"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcm",
            "system-leader-election",
            "leader-election",
        ),
        (
            User::new("system:kube-controller-manager", []),
            "/api/v1/pods",
            "kube-controller-manager",
            "workload-high",
        ),
        (
            User::new("system:kube-scheduler", []),
            "/api/v1/pods",
            "kube-scheduler",
            "workload-high",
        ),
        (
            sa("default", "app"),
            "/api/v1/namespaces/default/pods",
            "service-accounts",
            "workload-low",
        ),
        (
            User::new("alice", []),
            "/api/v1/namespaces/default/pods",
            "global-default",
            "global-default",
        ),
        (
            User::new("alice", []),
            "/version",
            "global-default",
            "global-default",
        ),
    ];
    for (user, uri, schema, level) in cases {
        let response = call(&api, &user, "GET", uri, None).await;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .unwrap_or_else(|| panic!("{uri} as {}: no {name}", user.name))
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            schemas[&header("X-Kubernetes-PF-FlowSchema-UID")],
            schema,
            "{uri} as {}",
            user.name
        );
        assert_eq!(
            levels[&header("X-Kubernetes-PF-PriorityLevel-UID")],
            level,
            "{uri} as {}",
            user.name
        );
    }
}

#[tokio::test]
async fn a_user_should_get_429_beyond_its_watch_cap_and_room_again_when_one_closes() {
    let api = api().await;
    let mut settings = FlowControlSettings::default();
    settings.max_watches_per_user = 2;
    api.set_flow_control(settings);
    let alice = User::new("alice", []);
    let watch = "/api/v1/namespaces/default/configmaps?watch=true";
    let first = call(&api, &alice, "GET", watch, None).await;
    let second = call(&api, &alice, "GET", watch, None).await;
    assert_ne!(first.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_ne!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    let third = call(&api, &alice, "GET", watch, None).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(third.headers()["retry-after"], "1");
    let status = json_of(third).await;
    assert_eq!(status["reason"], "TooManyRequests");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("--max-watches-per-user"),
        "{status}"
    );
    // Another user, and the admin, are not held to alice's count.
    let bob = call(&api, &User::new("bob", []), "GET", watch, None).await;
    assert_ne!(bob.status(), StatusCode::TOO_MANY_REQUESTS);
    let admin_watch = call(&api, &admin(), "GET", watch, None).await;
    assert_eq!(admin_watch.status(), StatusCode::OK);
    drop(first);
    let again = call(&api, &alice, "GET", watch, None).await;
    assert_ne!(again.status(), StatusCode::TOO_MANY_REQUESTS);
    drop((second, again, bob, admin_watch));
}

#[tokio::test]
async fn a_flow_schema_naming_a_missing_level_should_be_marked_dangling_until_it_exists() {
    let api = api().await;
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "orphan"},
        "spec": {"priorityLevelConfiguration": {"name": "later"}, "matchingPrecedence": 600,
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "carol"}}],
                            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
    let created = call(
        &api,
        &admin(),
        "POST",
        &format!("{FLOWCONTROL}/flowschemas"),
        Some(schema),
    )
    .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let dangling = |want: &'static str| {
        let api = api.clone();
        move || {
            let api = api.clone();
            async move {
                let fs = json_of(
                    call(
                        &api,
                        &admin(),
                        "GET",
                        &format!("{FLOWCONTROL}/flowschemas/orphan"),
                        None,
                    )
                    .await,
                )
                .await;
                let found = fs["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Dangling" && c["status"] == want);
                if found {
                    Ok(())
                } else {
                    Err(fs["status"].to_string())
                }
            }
        }
    };
    eventually("the FlowSchema is Dangling", dangling("True")).await;
    // Dangling: carol's request falls through to global-default.
    let schemas = names_by_uid(&api, "flowschemas").await;
    let carol = call(&api, &User::new("carol", []), "GET", "/version", None).await;
    let uid = carol.headers()["X-Kubernetes-PF-FlowSchema-UID"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(schemas[&uid], "global-default");
    let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "later"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}});
    let created = call(
        &api,
        &admin(),
        "POST",
        &format!("{FLOWCONTROL}/prioritylevelconfigurations"),
        Some(level),
    )
    .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    eventually("the FlowSchema is no longer Dangling", dangling("False")).await;
    let carol = call(&api, &User::new("carol", []), "GET", "/version", None).await;
    let uid = carol.headers()["X-Kubernetes-PF-FlowSchema-UID"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(schemas[&uid], "orphan");
}
