//! Who may talk to the server: the admin token or a client certificate of the cluster CA
//! authenticate; anonymous requests get kube-apiserver's 401 `Status`, except on the health
//! endpoints; a client certificate from another CA fails the TLS handshake; impersonation is
//! refused with a 403 `Status`.

use crate::common;

use common::{get, TestClient, TestServer};
use http::StatusCode;

// kube-apiserver's encoder ends every JSON body with a newline (issue 14.11a).
const UNAUTHORIZED: &str = concat!(
    r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#,
    "\n"
);

#[tokio::test]
async fn requests_without_valid_credentials_should_get_a_401_status() {
    let server = TestServer::start().await;
    let client = server.client();
    for token in [None, Some("not-the-token"), Some("")] {
        let answer = client.get("/version", token).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert_eq!(answer.body, UNAUTHORIZED);
        assert_eq!(
            answer.headers[http::header::CONTENT_TYPE],
            "application/json"
        );
    }
    let mut basic = get("/version", None);
    basic.headers_mut().insert(
        http::header::AUTHORIZATION,
        format!("Basic {}", server.token()).parse().unwrap(),
    );
    assert_eq!(client.send(basic).await.status, StatusCode::UNAUTHORIZED);
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_admin_token_should_authenticate_as_the_admin_and_not_reach_the_handler() {
    let server = TestServer::start().await;
    let client = server.client();
    let token = server.token();

    let answer = client.get("/whoami", Some(&token)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.body,
        "setpoint-admin\nsystem:masters\nsystem:authenticated\n"
    );
    let answer = client.get("/echo", Some(&token)).await;
    assert_eq!(answer.body, "length=0 authorization=false");
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_certificate_of_the_cluster_ca_should_authenticate_its_subject() {
    let server = TestServer::start().await;
    let pki = server.server.pki();
    let config = server.client_config(
        Some((pki.admin_certificate_pem(), pki.admin_key_pem())),
        &[b"http/1.1"],
    );
    let answer = TestClient::new(server.addr(), config)
        .get("/whoami", None)
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.body,
        "setpoint-admin\nsystem:masters\nsystem:authenticated\n"
    );
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_certificate_of_another_ca_should_fail_the_handshake() {
    let server = TestServer::start().await;
    let other = TestServer::start().await;
    let other_pki = other.server.pki();
    let config = server.client_config(
        Some((other_pki.admin_certificate_pem(), other_pki.admin_key_pem())),
        &[b"http/1.1"],
    );
    let client = TestClient::new(server.addr(), config);
    // With TLS 1.3 the client learns of the rejection at its first read.
    let result = async {
        let mut sender = {
            let io = hyper_util::rt::TokioIo::new(client.tls().await?);
            let (sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(std::io::Error::other)?;
            tokio::spawn(connection);
            sender
        };
        sender
            .send_request(get("/whoami", None))
            .await
            .map_err(std::io::Error::other)
    }
    .await;
    assert!(result.is_err(), "a foreign client certificate was accepted");
    server.server.shutdown().await.unwrap();
    other.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn health_endpoints_should_answer_ok_without_credentials() {
    let server = TestServer::start().await;
    let client = server.client();
    for path in ["/healthz", "/livez", "/readyz", "/healthz/ping"] {
        let answer = client.get(path, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        assert_eq!(answer.body, "ok", "{path}");
        assert_eq!(
            answer.headers[http::header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
    }
    assert_eq!(
        client.get("/healthzfoo", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn impersonation_should_be_refused_with_a_403_status_not_ignored() {
    // Regression (issue 14.14): `Impersonate-*` headers (`kubectl --as`) were ignored and the
    // request ran as the caller.
    let server = TestServer::start().await;
    let client = server.client();
    let token = server.token();
    let mut request = get("/whoami", Some(&token));
    request.headers_mut().insert(
        "Impersonate-User",
        http::HeaderValue::from_static("system:anonymous"),
    );
    let answer = client.send(request).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(
        answer.body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"users \"system:anonymous\" is forbidden: User \"setpoint-admin\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope: impersonation is not supported by this server","reason":"Forbidden","details":{"name":"system:anonymous","kind":"users"},"code":403}
"#
    );
    for (header, kind) in [
        ("impersonate-group", r#""kind":"groups""#),
        (
            "Impersonate-Uid",
            r#""group":"authentication.k8s.io","kind":"uids""#,
        ),
        (
            "Impersonate-Extra-Scopes",
            r#""group":"authentication.k8s.io","kind":"userextras""#,
        ),
    ] {
        let mut request = get("/whoami", Some(&token));
        request
            .headers_mut()
            .insert(header, http::HeaderValue::from_static("x"));
        let answer = client.send(request).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{header}");
        assert!(answer.body.contains(kind), "{header}: {}", answer.body);
    }
    // Without them the same request is served.
    assert_eq!(
        client.get("/whoami", Some(&token)).await.status,
        StatusCode::OK
    );
    server.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_servers_own_clients_should_act_as_the_loopback_user() {
    use http_body_util::BodyExt as _;
    use setpoint_store::{EmbeddedConfig, EmbeddedStore};

    let store = EmbeddedStore::open(EmbeddedConfig::in_memory()).unwrap();
    let api = setpoint_apiserver::Api::new(std::sync::Arc::new(store))
        .await
        .unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(bytes::Bytes::from_static(
            br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
        ))
        .unwrap();
    let response = api.handle_loopback(request).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        review["status"]["userInfo"],
        serde_json::json!({"username": "system:apiserver", "groups": ["system:masters", "system:authenticated"]})
    );
}
