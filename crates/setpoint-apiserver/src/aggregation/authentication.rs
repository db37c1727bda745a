//! `kube-system/extension-apiserver-authentication`: the ConfigMap aggregated API servers
//! read (with the Kubernetes libraries' `--authentication-kubeconfig` defaults) to learn whom
//! to trust — clients with certificates of the cluster CA (`client-ca-file`), and requests
//! presenting a certificate of the front-proxy CA named `front-proxy-client`
//! (`requestheader-*`), whose user is in the `X-Remote-*` headers. Written at start, and
//! only when its data differs.

use serde_json::{json, Map, Value};
use setpoint_core::ApiError;

use crate::api::Api;
use crate::pki::{Pki, FRONT_PROXY_CLIENT_COMMON_NAME};
use crate::registry::store::Scope;

/// Its namespace and name.
const NAMESPACE: &str = "kube-system";
const NAME: &str = "extension-apiserver-authentication";

/// The ConfigMap's `data`, as kube-apiserver writes it.
pub(crate) fn data(pki: &Pki) -> Map<String, Value> {
    let list = |items: &[&str]| json!(serde_json::to_string(items).unwrap_or_default());
    let mut data = Map::new();
    data.insert("client-ca-file".into(), json!(pki.ca_certificate_pem()));
    data.insert(
        "requestheader-allowed-names".into(),
        list(&[FRONT_PROXY_CLIENT_COMMON_NAME]),
    );
    data.insert(
        "requestheader-client-ca-file".into(),
        json!(pki.front_proxy_ca_pem()),
    );
    data.insert(
        "requestheader-extra-headers-prefix".into(),
        list(&["X-Remote-Extra-"]),
    );
    data.insert(
        "requestheader-group-headers".into(),
        list(&["X-Remote-Group"]),
    );
    data.insert(
        "requestheader-username-headers".into(),
        list(&["X-Remote-User"]),
    );
    data
}

/// Creates or updates the ConfigMap with `data`, retrying until the API takes it (the
/// namespace and the watch caches may still be loading).
pub(crate) async fn publish(api: &Api, data: Map<String, Value>) {
    for attempt in 0..60 {
        match write(api, &data).await {
            Ok(()) => return,
            Err(error) if attempt == 59 => {
                tracing::warn!(%error, "cannot publish {NAMESPACE}/{NAME}");
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    }
}

async fn write(api: &Api, data: &Map<String, Value>) -> Result<(), ApiError> {
    let store = api.registry_store_of("", "v1", "configmaps")?;
    match store.get(Some(NAMESPACE), NAME).await {
        Ok(current) if current["data"].as_object() == Some(data) => Ok(()),
        Ok(_) => {
            let change = |current: &Value| -> Result<Value, ApiError> {
                let mut next = current.clone();
                next["data"] = Value::Object(data.clone());
                Ok(next)
            };
            store
                .update(Some(NAMESPACE), NAME, Scope::Main, false, &change)
                .await
                .map(|_| ())
        }
        Err(e) if e.reason == setpoint_core::Reason::NotFound => {
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data});
            match store.create(Some(NAMESPACE), object, false).await {
                Ok(_) => Ok(()),
                Err(e) if e.reason == setpoint_core::Reason::AlreadyExists => {
                    Box::pin(write(api, data)).await
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}
