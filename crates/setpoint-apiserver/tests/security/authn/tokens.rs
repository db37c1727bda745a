//! ServiceAccount tokens from TokenRequest: they authenticate as the ServiceAccount, for their
//! audiences only, until they expire, not when tampered with, and bound ones only while their
//! pod or Secret lives; TokenReview says so too; the issuer's JWKS verifies them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use setpoint_apiserver::AuthenticationConfig;

use super::serving::Served;

/// Decodes a JWT's claims (unverified).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// Signs `claims` with the server's ServiceAccount key, read from `DATA_DIR/pki/sa.key`.
fn sign_with_server_key(served: &Served, claims: &Value) -> String {
    use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let pem = std::fs::read_to_string(served.pki().join("sa.key")).unwrap();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap();
    let rng = ring::rand::SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng).unwrap();
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(json!({"alg": "ES256"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key.sign(&rng, input.as_bytes()).unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_should_authenticate_for_their_audience_and_binding() {
    let served = Served::start(AuthenticationConfig::default()).await;
    served.ok(&["create", "serviceaccount", "robot"]).await;
    let account: Value =
        serde_json::from_str(&served.ok(&["get", "sa", "robot", "-o", "json"]).await).unwrap();
    let uid = account["metadata"]["uid"].as_str().unwrap().to_owned();

    // `kubectl create token`: an hour by default, for the API audience.
    let token = served
        .ok(&["create", "token", "robot"])
        .await
        .trim()
        .to_owned();
    let c = claims(&token);
    assert_eq!(c["iss"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(
        c["aud"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(c["sub"], "system:serviceaccount:default:robot");
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        3600
    );
    assert_eq!(c["kubernetes.io"]["serviceaccount"]["uid"], uid.as_str());
    let user = served
        .whoami(&token)
        .await
        .expect("the token authenticates");
    assert_eq!(user["username"], "system:serviceaccount:default:robot");
    assert_eq!(user["uid"], uid.as_str());
    assert_eq!(
        user["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    let jti = c["jti"].as_str().unwrap();
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/credential-id"],
        json!([format!("JTI={jti}")])
    );

    // Another audience, a tampered token, an expired one, a short one: refused.
    let other = served
        .ok(&[
            "create",
            "token",
            "robot",
            "--audience",
            "https://vault.example",
            "--duration",
            "20m",
        ])
        .await;
    assert_eq!(
        claims(other.trim())["exp"].as_i64().unwrap()
            - claims(other.trim())["iat"].as_i64().unwrap(),
        1200
    );
    assert!(
        served.whoami(other.trim()).await.is_none(),
        "wrong audience"
    );
    let mut tampered = token.clone().into_bytes();
    let at = token.rfind('.').unwrap() + 5;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    assert!(
        served
            .whoami(&String::from_utf8(tampered).unwrap())
            .await
            .is_none(),
        "tampered"
    );
    let mut expired = c.clone();
    expired["exp"] = json!(c["iat"].as_i64().unwrap() - 120);
    expired["nbf"] = json!(c["iat"].as_i64().unwrap() - 800);
    let still_good = sign_with_server_key(&served, &c);
    assert!(
        served.whoami(&still_good).await.is_some(),
        "the test signs as the server does"
    );
    assert!(
        served
            .whoami(&sign_with_server_key(&served, &expired))
            .await
            .is_none(),
        "expired"
    );
    let short = served
        .run(
            None,
            &["create", "token", "robot", "--duration", "5m"],
            None,
        )
        .await;
    assert!(
        !short.ok
            && short
                .stderr
                .contains("may not specify a duration less than 10 minutes"),
        "{}",
        short.stderr
    );
    let missing = served.run(None, &["create", "token", "nobody"], None).await;
    assert!(
        !missing.ok && missing.stderr.contains("not found"),
        "{}",
        missing.stderr
    );

    // TokenReview: the audiences asked for that the token names.
    let review = served
        .create(
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": other.trim(), "audiences": ["https://vault.example", "x"]}}),
        )
        .await;
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(
        review["status"]["audiences"],
        json!(["https://vault.example"])
    );
    assert_eq!(review["status"]["user"]["uid"], uid.as_str());
    let review = served
        .create(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": other.trim()}}))
        .await;
    assert_eq!(
        review["status"]["error"], "invalid bearer token",
        "{review}"
    );

    // Bound to a pod (nothing runs it): good until the pod is deleted.
    served
        .create(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "busybox"}]}}))
        .await;
    let bound = served
        .ok(&[
            "create",
            "token",
            "robot",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "p",
        ])
        .await;
    let bound = bound.trim();
    assert_eq!(claims(bound)["kubernetes.io"]["pod"]["name"], "p");
    let user = served
        .whoami(bound)
        .await
        .expect("a pod-bound token authenticates");
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["p"])
    );
    served.ok(&["create", "serviceaccount", "other"]).await;
    let wrong = served
        .run(
            None,
            &[
                "create",
                "token",
                "other",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "p",
            ],
            None,
        )
        .await;
    assert!(
        !wrong.ok && wrong.stderr.contains("different serviceaccount"),
        "{}",
        wrong.stderr
    );
    served.ok(&["delete", "pod", "p", "--wait=false"]).await;
    served.until_refused(bound, "pod deleted").await;

    // Bound to a Secret: dies with it.
    served
        .ok(&["create", "secret", "generic", "s", "--from-literal=a=b"])
        .await;
    let bound = served
        .ok(&[
            "create",
            "token",
            "robot",
            "--bound-object-kind",
            "Secret",
            "--bound-object-name",
            "s",
        ])
        .await;
    assert!(served.whoami(bound.trim()).await.is_some());
    served.ok(&["delete", "secret", "s"]).await;
    served.until_refused(bound.trim(), "secret deleted").await;

    // The ServiceAccount recreated has another uid: its old tokens are refused.
    served.ok(&["delete", "sa", "robot"]).await;
    served.ok(&["create", "serviceaccount", "robot"]).await;
    served
        .until_refused(&token, "serviceaccount recreated")
        .await;

    // Issuer discovery: the JWKS verifies a fresh token.
    let fresh = served.ok(&["create", "token", "robot"]).await;
    let discovery: Value = serde_json::from_str(
        &served
            .ok(&["get", "--raw", "/.well-known/openid-configuration"])
            .await,
    )
    .unwrap();
    assert_eq!(
        discovery["issuer"],
        "https://kubernetes.default.svc.cluster.local"
    );
    assert_eq!(
        discovery["jwks_uri"],
        "https://kubernetes.default.svc.cluster.local/openid/v1/jwks"
    );
    assert_eq!(
        discovery["id_token_signing_alg_values_supported"],
        json!(["ES256"])
    );
    let jwks: Value =
        serde_json::from_str(&served.ok(&["get", "--raw", "/openid/v1/jwks"]).await).unwrap();
    let key = &jwks["keys"][0];
    assert_eq!(key["kty"], "EC");
    let mut point = vec![4_u8];
    point.extend(URL_SAFE_NO_PAD.decode(key["x"].as_str().unwrap()).unwrap());
    point.extend(URL_SAFE_NO_PAD.decode(key["y"].as_str().unwrap()).unwrap());
    let fresh = fresh.trim();
    let (input, signature) = fresh.rsplit_once('.').unwrap();
    let header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(input.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["kid"], key["kid"]);
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &point)
        .verify(
            input.as_bytes(),
            &URL_SAFE_NO_PAD.decode(signature).unwrap(),
        )
        .expect("the JWKS key verifies the token");
    served.stop().await;
}
