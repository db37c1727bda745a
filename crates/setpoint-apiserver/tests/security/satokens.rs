//! ServiceAccount admission on an in-process API server with the plugin on (as `setpoint
//! server` runs it): a pod's ServiceAccount defaulted, a missing one refused with
//! kube-apiserver's 403, the `kube-api-access-*` token volume mounted unless automount is off,
//! and token projections validated. One server is shared by the checks.

use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use setpoint_apiserver::Api;
use setpoint_store::{EmbeddedConfig, EmbeddedStore};

const NS: &str = "satokens";
const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// `POST` of `body` to `path`: the status code and the answer.
async fn post(api: &Api, path: &str, body: Value) -> (u16, Value) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_string()))
        .unwrap();
    let response = api.handle(request).await;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Creates a pod named `name` with `spec` (a container added if it has none).
async fn create(api: &Api, name: &str, spec: Value) -> Result<Value, Value> {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec});
    match post(api, &format!("/api/v1/namespaces/{NS}/pods"), pod).await {
        (201, created) => Ok(created),
        (_, status) => Err(status),
    }
}

async fn service_account(api: &Api, name: &str, automount: Option<bool>) {
    let mut sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
    if let Some(a) = automount {
        sa["automountServiceAccountToken"] = json!(a);
    }
    let (code, body) = post(api, &format!("/api/v1/namespaces/{NS}/serviceaccounts"), sa).await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn service_account_admission_should_default_check_and_mount_the_token() {
    let store = EmbeddedStore::open(EmbeddedConfig::in_memory()).unwrap();
    let api = Api::new(Arc::new(store)).await.unwrap();
    api.enable_service_account_admission();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    assert_eq!(post(&api, "/api/v1/namespaces", namespace).await.0, 201);

    // No `default` ServiceAccount (no loop creates it here): refused once the retries are over.
    let refused = create(&api, "early", json!({})).await.unwrap_err();
    assert_eq!(
        (&refused["code"], &refused["reason"]),
        (&json!(403), &json!("Forbidden"))
    );
    assert_eq!(
        refused["message"],
        format!("pods \"early\" is forbidden: error looking up service account {NS}/default: serviceaccount \"default\" not found")
    );
    let named = create(&api, "named", json!({"serviceAccountName": "robot"}))
        .await
        .unwrap_err();
    assert_eq!(
        named["message"],
        format!("pods \"named\" is forbidden: error looking up service account {NS}/robot: serviceaccount \"robot\" not found")
    );

    service_account(&api, "default", None).await;
    service_account(&api, "quiet", Some(false)).await;
    let created = create(
        &api,
        "p",
        json!({"initContainers": [{"name": "i", "image": "busybox"}],
                   "containers": [{"name": "c", "image": "busybox"}]}),
    )
    .await
    .unwrap();
    let spec = &created["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let volume = &spec["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    assert!(
        name.starts_with("kube-api-access-") && name.len() == 21,
        "{name}"
    );
    assert_eq!(
        volume["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]})
    );
    for list in ["initContainers", "containers"] {
        assert_eq!(
            spec[list][0]["volumeMounts"],
            json!([{"name": name, "readOnly": true, "mountPath": MOUNT}]),
            "{list}"
        );
    }

    // Automount off on the ServiceAccount, or on the pod: no volume.
    let quiet = create(&api, "q", json!({"serviceAccountName": "quiet"}))
        .await
        .unwrap();
    assert!(quiet["spec"]["volumes"].is_null());
    let off = create(&api, "off", json!({"automountServiceAccountToken": false}))
        .await
        .unwrap();
    assert!(off["spec"]["volumes"].is_null());
    // The pod's `true` wins over the ServiceAccount's `false`.
    let on = create(
        &api,
        "on",
        json!({"serviceAccountName": "quiet", "automountServiceAccountToken": true}),
    )
    .await
    .unwrap();
    assert_eq!(on["spec"]["volumes"].as_array().map(Vec::len), Some(1));

    // A projection asking for less than ten minutes is invalid (422).
    let short = create(
        &api,
        "short",
        json!({"volumes": [{"name": "t", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 60}}]}}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(short["code"], 422);
    assert!(
        short["message"].as_str().unwrap().contains("spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"),
        "{short}"
    );
    // Defaults of a projection the user writes.
    let own = create(
        &api,
        "own",
        json!({"volumes": [{"name": "t", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "audience": "vault"}}]}}]}),
    )
    .await
    .unwrap();
    let own = &own["spec"];
    assert_eq!(own["volumes"][0]["projected"]["defaultMode"], 420);
    assert_eq!(
        own["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3600
    );
}
