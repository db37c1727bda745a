//! Calling webhooks over HTTPS, shared by admission webhooks (`admission/`) and CRD conversion
//! webhooks (`crd/conversion/`): a `clientConfig` parsed once ([`ClientConfig`]: a URL or a
//! Service, and the TLS settings its `caBundle` gives), where a call goes ([`endpoints`]: a
//! host name looked up, or one of a Service's ready endpoints), and the HTTPS `POST` itself
//! ([`client`]: pooled connections, the whole call bounded by a timeout). [`call`] puts them
//! together: resolving the destination counts against the same timeout as the exchange.

pub(crate) mod client;
pub(crate) mod endpoints;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use crate::api::Served;
pub(crate) use client::{Client, Target};

/// Where a webhook is.
#[derive(Debug)]
pub(crate) enum Endpoint {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// A webhook's `clientConfig`, ready to call.
#[derive(Debug)]
pub(crate) struct ClientConfig {
    pub(crate) endpoint: Endpoint,
    /// The TLS settings from `caBundle`, or why they are unusable.
    pub(crate) tls: Result<Arc<rustls::ClientConfig>, String>,
    /// A fingerprint of `caBundle`: webhooks with the same one share connections.
    pub(crate) tls_key: u64,
}

impl ClientConfig {
    /// Parses a `clientConfig` (`url`, or `service` with `namespace`, `name`, `path`, `port`
    /// defaulting to 443; `caBundle` as base64 PEM, the system's roots when absent).
    pub(crate) fn parse(config: &Value) -> ClientConfig {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let endpoint = match config["url"].as_str() {
            Some(url) => Endpoint::Url(url.to_owned()),
            None => {
                let service = &config["service"];
                Endpoint::Service {
                    namespace: text(&service["namespace"]),
                    name: text(&service["name"]),
                    path: text(&service["path"]),
                    port: service["port"]
                        .as_u64()
                        .and_then(|p| u16::try_from(p).ok())
                        .unwrap_or(443),
                }
            }
        };
        let tls_key = {
            use std::hash::{Hash as _, Hasher as _};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            config["caBundle"].as_str().hash(&mut hasher);
            hasher.finish()
        };
        let ca = config["caBundle"].as_str().map(|b| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("the caBundle is not base64: {e}"))
        });
        let tls = match ca {
            Some(Err(e)) => Err(e),
            Some(Ok(pem)) => client::tls_config(Some(&pem)),
            None => client::tls_config(None),
        };
        ClientConfig {
            endpoint,
            tls,
            tls_key,
        }
    }
}

/// Posts `body` to the webhook of `config` within `timeout` (finding its destination
/// included) and returns the answer's body. The error is the text kube-apiserver gives after
/// the webhook's name: `failed to call webhook: …`. Cancel-safe.
pub(crate) async fn call(
    client: &Client,
    served: &Served,
    config: &ClientConfig,
    timeout: Duration,
    body: Bytes,
) -> Result<Bytes, String> {
    let tls = config
        .tls
        .as_ref()
        .map_err(|e| format!("failed to call webhook: {e}"))?;
    let started = tokio::time::Instant::now();
    let destination = tokio::time::timeout(
        timeout,
        endpoints::resolve(served, &config.endpoint, timeout.as_secs()),
    )
    .await
    .map_err(|_| "failed to call webhook: context deadline exceeded".to_owned())?
    .map_err(|e| format!("failed to call webhook: {e}"))?;
    let target = Target {
        address: destination.address,
        server_name: &destination.server_name,
        host: &destination.host,
        path: &destination.path,
        url: &destination.url,
    };
    client
        .post(
            tls,
            config.tls_key,
            &target,
            body,
            timeout.saturating_sub(started.elapsed()),
        )
        .await
        .map_err(|e| format!("failed to call webhook: {e}"))
}
