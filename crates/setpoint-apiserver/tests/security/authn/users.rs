//! The other credentials: the static token file (re-read when it changes), bootstrap tokens
//! (kube-system Secrets), legacy ServiceAccount token Secrets (filled only when asked for, good
//! while the Secret lives), each seen through `kubectl auth whoami`.

use serde_json::json;
use setpoint_apiserver::AuthenticationConfig;

use super::serving::Served;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_bootstrap_and_legacy_tokens_should_authenticate_as_their_users() {
    let served = Served::start(AuthenticationConfig::default()).await;

    // The static token file, DATA_DIR/pki/tokens.csv by default, picked up while running.
    let alice = "alice-token-0123456789abcdef0123456789";
    assert!(served.whoami(alice).await.is_none());
    std::fs::write(
        served.pki().join("tokens.csv"),
        format!("{alice},alice,1001,\"dev,ops\"\n"),
    )
    .unwrap();
    let mut user = None;
    for _ in 0..50 {
        user = served.whoami(alice).await;
        if user.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let user = user.expect("the static token authenticates once the file is there");
    assert_eq!(
        user,
        json!({"username": "alice", "uid": "1001", "groups": ["dev", "ops", "system:authenticated"]})
    );

    // A bootstrap token.
    let bootstrap = "abcdef.0123456789abcdef";
    assert!(served.whoami(bootstrap).await.is_none());
    served
        .create(
            &json!({"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "stringData": {"token-id": "abcdef", "token-secret": "0123456789abcdef",
                "usage-bootstrap-authentication": "true", "expiration": "2099-01-01T00:00:00Z",
                "auth-extra-groups": "system:bootstrappers:worker"}}),
        )
        .await;
    let user = served
        .whoami(bootstrap)
        .await
        .expect("the bootstrap token authenticates");
    assert_eq!(user["username"], "system:bootstrap:abcdef");
    assert_eq!(
        user["groups"],
        json!([
            "system:bootstrappers",
            "system:bootstrappers:worker",
            "system:authenticated"
        ])
    );
    assert!(served.whoami("abcdef.0123456789abcdee").await.is_none());
    served
        .ok(&[
            "delete",
            "secret",
            "-n",
            "kube-system",
            "bootstrap-token-abcdef",
        ])
        .await;
    served
        .until_refused(bootstrap, "bootstrap Secret deleted")
        .await;

    // Legacy token Secrets: none for a new ServiceAccount; filled when a user asks.
    served.ok(&["create", "serviceaccount", "old"]).await;
    let secrets = served.ok(&["get", "secrets", "-o", "name"]).await;
    assert_eq!(secrets.trim(), "", "no token Secret is made unasked");
    served
        .create(&json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "old-token", "annotations": {"kubernetes.io/service-account.name": "old"}}}))
        .await;
    let mut token = String::new();
    for _ in 0..100 {
        let out = served
            .run(
                None,
                &["get", "secret", "old-token", "-o", "jsonpath={.data.token}"],
                None,
            )
            .await;
        if out.ok && !out.stdout.is_empty() {
            token = out.stdout;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    use base64::Engine as _;
    let token = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .unwrap(),
    )
    .unwrap();
    let ca = served
        .ok(&[
            "get",
            "secret",
            "old-token",
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ])
        .await;
    assert!(!ca.is_empty(), "the Secret carries the cluster CA");
    let user = served
        .whoami(&token)
        .await
        .expect("the legacy token authenticates");
    assert_eq!(user["username"], "system:serviceaccount:default:old");
    served.ok(&["delete", "secret", "old-token"]).await;
    served
        .until_refused(&token, "legacy token Secret deleted")
        .await;
    served.stop().await;
}
