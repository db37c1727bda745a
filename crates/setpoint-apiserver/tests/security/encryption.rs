//! Encryption at rest, through the API on an embedded store on disk: a Secret's values never
//! reach the store's files (write-ahead log, snapshots) in plaintext after a create and an
//! update, while a ConfigMap's do; a Secret stored in plaintext before encryption still reads;
//! a server with the wrong key answers `500 Internal error` naming the object's key.

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use setpoint_apiserver::encryption::{self, EncryptedStore, EncryptionConfig};
use setpoint_apiserver::Api;
use setpoint_store::{EmbeddedConfig, EmbeddedStore, Store};

const SECRETS: &str = "/api/v1/namespaces/default/secrets";

async fn call(api: &Api, method: &str, uri: &str, body: Value) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Bytes::from(if body.is_null() {
            String::new()
        } else {
            body.to_string()
        }))
        .unwrap();
    let response = api.handle(request).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Every file under `dir` that contains `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
        } else if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[tokio::test]
async fn secrets_should_be_encrypted_in_the_store_files_and_plaintext_from_before_still_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (config, generated) =
        encryption::load_or_generate(&encryption::default_config_path(tmp.path())).unwrap();
    assert!(generated);
    let config = Arc::new(config);
    let store_dir = tmp.path().join("store");
    // Small log segments and a quick compactor, so that a snapshot is written soon after a
    // compaction.
    let mut store_config = EmbeddedConfig::on_disk(&store_dir);
    store_config.segment_bytes = 1024;
    store_config.compaction_interval = Some(std::time::Duration::from_millis(20));
    let raw = EmbeddedStore::open(store_config).unwrap();
    // A Secret stored before encryption was configured.
    let old = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "from-before", "namespace": "default", "uid": "u-1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "data": {"k": b64("plaintext-from-before")}});
    raw.create(
        Bytes::from_static(b"/registry/secrets/default/from-before"),
        Bytes::from(old.to_string()),
    )
    .await
    .unwrap();
    let api = Api::new(Arc::new(EncryptedStore::new(
        Arc::new(raw.clone()),
        config.clone(),
    )))
    .await
    .unwrap();

    let first = "first-secret-marker-0c9f21";
    let second = "second-secret-marker-7ab3e4";
    let plain_cm = "configmap-marker-5d1e08";
    let secret = |value: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "data": {"k": b64(value)}})
    };
    let created = call(&api, "POST", SECRETS, secret(first)).await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let mut update = secret(second);
    update["metadata"]["resourceVersion"] = created.1["metadata"]["resourceVersion"].clone();
    let updated = call(&api, "PUT", &format!("{SECRETS}/s"), update).await;
    assert_eq!(updated.0, StatusCode::OK, "{}", updated.1);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                    "data": {"k": plain_cm}});
    let made = call(&api, "POST", "/api/v1/namespaces/default/configmaps", cm).await;
    assert_eq!(made.0, StatusCode::CREATED, "{}", made.1);

    // Reads answer plaintext: the new Secret, and the one from before encryption.
    let got = call(&api, "GET", &format!("{SECRETS}/s"), Value::Null).await;
    assert_eq!(got.1["data"]["k"], b64(second), "{}", got.1);
    let got = call(&api, "GET", &format!("{SECRETS}/from-before"), Value::Null).await;
    assert_eq!(
        got.1["data"]["k"],
        b64("plaintext-from-before"),
        "{}",
        got.1
    );
    let listed = call(&api, "GET", SECRETS, Value::Null).await;
    let names: Vec<_> = listed.1["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["from-before", "s"], "{}", listed.1);

    // A server whose key has the same name but another secret cannot read it: a 500 naming it.
    let wrong = EncryptionConfig::from_yaml(&format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
         - resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: key1, secret: {}}}]}}\n  - identity: {{}}\n",
        b64("0123456789abcdef0123456789abcdef")
    ))
    .unwrap();
    let wrong_api = Api::new(Arc::new(EncryptedStore::new(
        Arc::new(raw.clone()),
        Arc::new(wrong),
    )))
    .await
    .unwrap();
    let failed = call(&wrong_api, "GET", &format!("{SECRETS}/s"), Value::Null).await;
    assert_eq!(failed.0, StatusCode::INTERNAL_SERVER_ERROR, "{}", failed.1);
    assert_eq!(failed.1["reason"], "InternalError", "{}", failed.1);
    let message = failed.1["message"].as_str().unwrap();
    assert!(
        message.starts_with("Internal error occurred: "),
        "{message}"
    );
    assert!(
        message.contains("unable to transform key \"/registry/secrets/default/s\"")
            && message.contains("aesgcm key \"key1\" failed to decrypt"),
        "{message}"
    );
    // Its lists leave the unreadable one out (logged) and still answer the others.
    let listed = call(&wrong_api, "GET", SECRETS, Value::Null).await;
    assert_eq!(listed.0, StatusCode::OK, "{}", listed.1);
    let names: Vec<_> = listed.1["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["from-before"], "{}", listed.1);
    // The plaintext one still reads there (identity).
    let got = call(
        &wrong_api,
        "GET",
        &format!("{SECRETS}/from-before"),
        Value::Null,
    )
    .await;
    assert_eq!(got.0, StatusCode::OK, "{}", got.1);

    // Into a snapshot too, then scan every file of the store.
    let now = raw.current_revision().await.unwrap();
    raw.compact(now).await.unwrap();
    let has_snapshot = || {
        std::fs::read_dir(&store_dir)
            .unwrap()
            .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "snap"))
    };
    setpoint_testenv::eventually("a snapshot is written", || async { has_snapshot() }).await;
    drop((api, wrong_api));
    raw.close();
    for needle in [first, second, &b64(first)[..20], &b64(second)[..20]] {
        let found = files_containing(&store_dir, needle.as_bytes());
        assert!(found.is_empty(), "{needle} is in plaintext in {found:?}");
    }
    // The scan finds what is there: the ConfigMap is not encrypted (only Secrets are).
    assert!(!files_containing(&store_dir, plain_cm.as_bytes()).is_empty());
    let encrypted = files_containing(&store_dir, b"k8s:enc:aesgcm:v1:key1:");
    // The snapshot holds it; the log segments it covers may already be gone (the store drops
    // them once a snapshot is written), so the log is not required to.
    assert!(
        encrypted.iter().any(|f| f.ends_with(".snap")),
        "the encrypted Secret is in a snapshot: {encrypted:?}"
    );
}
