//! Node identities (issue 19, identities): an agent acting as `system:node:<node>` may change
//! only its own Node (not its restricted labels, not its taints), its own Lease and the pods
//! bound to it (NodeRestriction), and read only the Secrets and ConfigMaps its pods reference
//! (the node authorizer). Requests are made as each user in-process (`Api::handle_as`),
//! exactly as `setpoint server`'s local agent makes them.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt as _;
use serde_json::{json, Value};
use setpoint_apiserver::identities::node_user;
use setpoint_apiserver::{Api, User};
use setpoint_testenv::TestEnv;

/// Sends `method path` with `body` as `user`; the status and the decoded body.
async fn call(
    api: &Arc<Api>,
    user: &User,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(Bytes::from(body.map(|b| b.to_string()).unwrap_or_default()))
        .unwrap();
    let response = api.handle_as(user.clone(), request).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Polls `GET path` as `user` until it answers `want` (the node authorizer follows the watch
/// caches, which trail the store by moments); its last answer.
async fn get_until(
    api: &Arc<Api>,
    user: &User,
    path: &str,
    want: StatusCode,
) -> (StatusCode, Value) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, body) = call(api, user, "GET", path, None).await;
        if status == want || std::time::Instant::now() > deadline {
            return (status, body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn pod(name: &str, node: &str, secret: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "busybox",
                "env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": secret, "key": "k"}}}]}],
            "volumes": [{"name": "v", "configMap": {"name": format!("{name}-config")}}]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_should_change_only_itself_and_its_pods() {
    let env = TestEnv::start().await.unwrap();
    let api = env.api();
    let admin = User::loopback();
    for node in ["n1", "n2"] {
        let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}});
        let (status, _) = call(api, &admin, "POST", "/api/v1/nodes", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    for (name, node, secret) in [("p1", "n1", "s1"), ("p2", "n2", "s2")] {
        let (status, body) = call(
            api,
            &admin,
            "POST",
            "/api/v1/namespaces/default/pods",
            Some(pod(name, node, secret)),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let n1 = node_user("n1");

    // Reads: only what its pods reference (the node authorizer).
    for secret in ["s1", "s2", "s3"] {
        let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret}, "stringData": {"k": "v"}});
        let (status, _) = call(
            api,
            &admin,
            "POST",
            "/api/v1/namespaces/default/secrets",
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let secret = |name: &str| format!("/api/v1/namespaces/default/secrets/{name}");
    let (status, body) = get_until(api, &n1, &secret("s1"), StatusCode::OK).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["k"], "dg==");
    for other in ["s2", "s3"] {
        let (status, body) = call(api, &n1, "GET", &secret(other), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{other}: {body}");
        assert!(
            body["message"].as_str().unwrap().starts_with(&format!(
                "secrets \"{other}\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\""
            )),
            "{body}"
        );
    }
    let (status, _) = call(api, &n1, "GET", "/api/v1/namespaces/default/secrets", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a list of every secret");
    let (status, _) = call(
        api,
        &n1,
        "GET",
        "/api/v1/namespaces/default/configmaps/p1-config",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "allowed, and missing");
    let (status, _) = call(
        api,
        &n1,
        "GET",
        "/api/v1/namespaces/default/configmaps/p2-config",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Its own Node: yes; another's: 403 with kube's message.
    let annotate = json!({"metadata": {"annotations": {"a": "b"}}});
    let (status, _) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/nodes/n1",
        Some(annotate.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(api, &n1, "PATCH", "/api/v1/nodes/n2", Some(annotate)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["message"],
        "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\""
    );
    let (status, _) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/nodes/n2/status",
        Some(json!({"status": {"phase": "Running"}})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Not its restricted labels, nor its taints; its kubelet labels, yes.
    let label = |k: &str| json!({"metadata": {"labels": {k: "x"}}});
    let (status, body) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/nodes/n1",
        Some(label("node-restriction.kubernetes.io/trusted")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/nodes/n1",
        Some(label("node-role.kubernetes.io/control-plane")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/nodes/n1",
        Some(label("topology.kubernetes.io/zone")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let taint = json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    let (status, _) = call(api, &n1, "PATCH", "/api/v1/nodes/n1", Some(taint)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Its pods' status: yes; another node's pod: 403, and no deleting or creating it either.
    let ready = json!({"status": {"phase": "Running"}});
    let (status, body) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/namespaces/default/pods/p1/status",
        Some(ready.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/namespaces/default/pods/p2/status",
        Some(ready),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("can only update pod status for pods with spec.nodeName set to itself"),
        "{body}"
    );
    let relabel = json!({"metadata": {"labels": {"app": "other"}}, "status": {"phase": "Running"}});
    let (status, _) = call(
        api,
        &n1,
        "PATCH",
        "/api/v1/namespaces/default/pods/p1/status",
        Some(relabel),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "labels through the status");
    let (status, _) = call(
        api,
        &n1,
        "DELETE",
        "/api/v1/namespaces/default/pods/p2",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = call(
        api,
        &n1,
        "POST",
        "/api/v1/namespaces/default/pods",
        Some(pod("p3", "n1", "s1")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no mirror pods");
    let (status, _) = call(
        api,
        &n1,
        "DELETE",
        "/api/v1/namespaces/default/pods/p1?gracePeriodSeconds=0",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "its own pod");
    let (status, _) = get_until(api, &n1, &secret("s1"), StatusCode::FORBIDDEN).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "no pod of n1 references s1 any more"
    );

    // Its Lease only.
    let lease = |name: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}});
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let (status, _) = call(api, &n1, "POST", leases, Some(lease("n2"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = call(api, &n1, "POST", leases, Some(lease("n1"))).await;
    assert_eq!(status, StatusCode::CREATED);

    // Someone else is not restricted.
    let (status, _) = call(
        api,
        &admin,
        "PATCH",
        "/api/v1/nodes/n2",
        Some(label("node-restriction.kubernetes.io/trusted")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}
