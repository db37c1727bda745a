//! `kube-system/extension-apiserver-authentication`: the ConfigMap aggregated API servers
//! read (with the Kubernetes libraries' `--authentication-kubeconfig` defaults) to learn whom
//! to trust — clients with certificates of the cluster CA (`client-ca-file`), and requests
//! presenting a certificate of the front-proxy CA named `front-proxy-client`
//! (`requestheader-*`), whose user is in the `X-Remote-*` headers. Written at start, and
//! only when its data differs. As kube-apiserver replicas do, each adds its CAs to the
//! bundles already published rather than replacing them, so replicas with different
//! front-proxy CAs are all trusted.

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

/// The keys holding CA bundles, merged with what is published.
const BUNDLES: [&str; 2] = ["client-ca-file", "requestheader-client-ca-file"];

/// `ours` with the CA bundles merged into `published`'s: the certificates published first,
/// then ours that are not among them.
fn merged(published: &Value, ours: &Map<String, Value>) -> Map<String, Value> {
    let mut data = ours.clone();
    for key in BUNDLES {
        let Some(old) = published[key].as_str() else {
            continue;
        };
        let mine = ours.get(key).and_then(Value::as_str).unwrap_or_default();
        let mut bundle = old.trim_end().to_owned();
        for block in pem_blocks(mine) {
            if !pem_blocks(old).contains(&block) {
                bundle.push('\n');
                bundle.push_str(&block);
            }
        }
        bundle.push('\n');
        data.insert(key.to_owned(), json!(bundle));
    }
    data
}

/// The PEM blocks of a bundle, each from its `-----BEGIN` line to its `-----END` line.
fn pem_blocks(bundle: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in bundle.lines().map(str::trim) {
        if line.starts_with("-----BEGIN") {
            current = Some(String::new());
        }
        if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
            if line.starts_with("-----END") {
                blocks.extend(current.take());
            }
        }
    }
    blocks
        .into_iter()
        .map(|b| b.trim_end().to_owned())
        .collect()
}

async fn write(api: &Api, ours: &Map<String, Value>) -> Result<(), ApiError> {
    let store = api.registry_store_of("", "v1", "configmaps")?;
    match store.get(Some(NAMESPACE), NAME).await {
        Ok(current) if current["data"].as_object() == Some(&merged(&current["data"], ours)) => {
            Ok(())
        }
        Ok(_) => {
            let change = |current: &Value| -> Result<Value, ApiError> {
                let mut next = current.clone();
                next["data"] = Value::Object(merged(&current["data"], ours));
                Ok(next)
            };
            store
                .update(Some(NAMESPACE), NAME, Scope::Main, false, &change)
                .await
                .map(|_| ())
        }
        Err(e) if e.reason == setpoint_core::Reason::NotFound => {
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": ours});
            match store.create(Some(NAMESPACE), object, false).await {
                Ok(_) => Ok(()),
                Err(e) if e.reason == setpoint_core::Reason::AlreadyExists => {
                    Box::pin(write(api, ours)).await
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const B: &str = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n";

    #[test]
    fn bundles_should_gain_our_certificates_once() {
        let mut ours = Map::new();
        ours.insert("requestheader-client-ca-file".into(), json!(B));
        ours.insert(
            "requestheader-allowed-names".into(),
            json!("[\"front-proxy-client\"]"),
        );
        let published = json!({"requestheader-client-ca-file": A});
        let data = merged(&published, &ours);
        let bundle = data["requestheader-client-ca-file"].as_str().unwrap();
        assert_eq!(bundle, format!("{A}{B}"));
        assert_eq!(pem_blocks(bundle).len(), 2);
        // Already there: unchanged.
        let again = merged(&Value::Object(data.clone()), &ours);
        assert_eq!(again, data);
        // Nothing published yet: ours.
        assert_eq!(merged(&Value::Null, &ours), ours);
    }
}
