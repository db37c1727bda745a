//! The availability checks (kube-aggregator's remote availability controller): for each
//! APIService with a Service, in order — the Service exists (`ServiceNotFound`), has the port
//! (`ServicePortError`), has a ready endpoint (`MissingEndpoints`), and `GET
//! /apis/{group}/{version}` there answers 2xx within 5 s (`FailedDiscoveryCheck`, the error in
//! the message); else `Available=True reason=Passed`. The condition is written only when it
//! changes. A passing check also refreshes the server's discovery (`discovery`); a failing one
//! marks it stale.
//!
//! One task checks every APIService each interval (kube: 30 s) and within a second of a change
//! to APIServices, Services, Endpoints or EndpointSlices. Every replica runs it, as every
//! kube-apiserver does: they compute the same condition, and a write that changes nothing is
//! not made.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body_util::{BodyExt as _, Limited};
use serde_json::{json, Value};

use super::registered::Registered;
use super::{discovery, transport};
use crate::api::Api;
use crate::registry::store::Scope;
use crate::webhook::endpoints::{service_address, ServiceError};

/// How long the discovery check may take (kube: 5 s).
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the task looks for changes.
const POLL: Duration = Duration::from_secs(1);

/// The largest discovery document read.
const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// The resources whose changes trigger a check.
const WATCHED: [(&str, &str, &str); 4] = [
    ("apiregistration.k8s.io", "v1", "apiservices"),
    ("", "v1", "services"),
    ("", "v1", "endpoints"),
    ("discovery.k8s.io", "v1", "endpointslices"),
];

/// Starts the checks; they end with the API.
pub(super) fn start(api: &Arc<Api>, interval: Duration) {
    tokio::spawn(run(Arc::downgrade(api), interval));
}

async fn run(weak: Weak<Api>, interval: Duration) {
    let mut seen: Option<Vec<Option<crate::watchcache::Objects>>> = None;
    let mut last_full: Option<Instant> = None;
    loop {
        {
            let Some(api) = weak.upgrade() else { return };
            let now = snapshot(&api);
            let changed = seen.as_ref().is_none_or(|s| {
                s.len() != now.len()
                    || s.iter().zip(&now).any(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) => !a.ptr_eq(b),
                        (None, None) => false,
                        _ => true,
                    })
            });
            if changed || last_full.is_none_or(|t| t.elapsed() >= interval) {
                check_all(&api).await;
                seen = Some(snapshot(&api));
                last_full = Some(Instant::now());
            }
        }
        tokio::time::sleep(POLL.min(interval)).await;
    }
}

fn snapshot(api: &Api) -> Vec<Option<crate::watchcache::Objects>> {
    let served = api.served();
    WATCHED
        .iter()
        .map(|(g, v, p)| served.store(g, v, p).map(|s| s.cache().snapshot().0))
        .collect()
}

/// Checks every APIService with a Service, concurrently.
async fn check_all(api: &Api) {
    let registered = super::registered(api);
    let remote: Vec<&Arc<Registered>> = registered.iter().filter(|r| r.service.is_some()).collect();
    let names: Vec<String> = remote.iter().map(|r| r.name.clone()).collect();
    let state = super::state(api);
    state.discovery.retain(&names);
    state.retain_openapi_v2(&names);
    futures::future::join_all(remote.into_iter().map(|r| check_one(api, r))).await;
}

async fn check_one(api: &Api, r: &Registered) {
    let state = super::state(api);
    let (status, reason, message) = match check(api, r).await {
        Ok(entry) => {
            if let Some(entry) = entry {
                state.discovery.store(&r.name, entry);
            }
            ("True", "Passed", "all checks passed".to_owned())
        }
        Err((reason, message)) => {
            state.discovery.mark_stale(&r.name);
            ("False", reason, message)
        }
    };
    let old = &r.condition;
    if old["status"] == status && old["reason"] == reason && old["message"] == message.as_str() {
        return;
    }
    if let Err(error) = write(api, &r.name, status, reason, &message).await {
        tracing::debug!(apiservice = %r.name, %error, "cannot write the Available condition");
    }
}

/// The check; on success, the discovery entry of its group-version (if it could be read).
async fn check(api: &Api, r: &Registered) -> Result<Option<Value>, (&'static str, String)> {
    let Some(service) = &r.service else {
        return Ok(None);
    };
    let (ns, name) = (&service.namespace, &service.name);
    let served = api.served();
    let address = service_address(&served, ns, name, service.port)
        .await
        .map_err(|e| match e {
            ServiceError::NotServed | ServiceError::NotFound { .. } => (
                "ServiceNotFound",
                format!("service/{name} in \"{ns}\" is not present"),
            ),
            ServiceError::NoPort { port, .. } => (
                "ServicePortError",
                format!("service/{name} in \"{ns}\" is not listening on port {port}"),
            ),
            ServiceError::NoEndpoints { port_name, .. } => (
                "MissingEndpoints",
                format!("endpoints for service/{name} in \"{ns}\" have no addresses with port name \"{port_name}\""),
            ),
        })?;
    let path = format!("/apis/{}/{}", r.group, r.version);
    let url = format!("https://{address}{path}");
    let failed = |e: String| {
        (
            "FailedDiscoveryCheck",
            format!("failing or missing response from {url}: {e}"),
        )
    };
    let tls = r
        .tls(super::state(api).identity())
        .map_err(|e| failed(e.clone()))?;
    let host = format!("{}:{}", service.server_name(), service.port);
    let pool = super::state(api).pool.clone();
    let get = |path: String, accept: &'static str| {
        let (tls, host, pool) = (tls.clone(), host.clone(), pool.clone());
        let server_name = service.server_name();
        let tls_key = r.tls_key;
        async move {
            let to = transport::Destination {
                tls: &tls,
                tls_key,
                address,
                server_name: &server_name,
            };
            fetch(&pool, &to, &host, &path, accept).await
        }
    };
    let (code, _, legacy) = get(path.clone(), "application/json")
        .await
        .map_err(|e| failed(format!("Get {url:?}: {e}")))?;
    if !code.is_success() {
        return Err(failed(format!("bad status from {url}: {}", code.as_u16())));
    }
    // Its Swagger 2.0 definitions, for `/openapi/v2` (kept as they were if unreadable).
    if let Ok((code, _, body)) = get("/openapi/v2".to_owned(), "application/json").await {
        let definitions = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|doc| doc["definitions"].as_object().cloned());
        if let (true, Some(definitions)) = (code.is_success(), definitions) {
            super::state(api).set_openapi_v2(&r.name, definitions);
        }
    }
    // Its resources: from its aggregated discovery if it has that, else from the list above.
    let aggregated = match get("/apis".to_owned(), discovery::AGGREGATED_ACCEPT).await {
        Ok((code, content_type, body))
            if code.is_success() && content_type.contains("apidiscovery.k8s.io") =>
        {
            serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|doc| discovery::from_aggregated(&doc, &r.group, &r.version))
        }
        _ => None,
    };
    Ok(aggregated.or_else(|| {
        serde_json::from_slice::<Value>(&legacy)
            .ok()
            .and_then(|list| discovery::from_legacy(&list, &r.group, &r.version))
    }))
}

/// `GET path` as `system:kube-aggregator` (in `system:masters`), within [`CHECK_TIMEOUT`]:
/// the status, `Content-Type` and body.
async fn fetch(
    pool: &Arc<transport::Pool>,
    to: &transport::Destination<'_>,
    host: &str,
    path: &str,
    accept: &'static str,
) -> Result<(StatusCode, String, Bytes), String> {
    let exchange = async {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
        headers.insert(
            http::header::HOST,
            HeaderValue::from_str(host).map_err(|e| e.to_string())?,
        );
        headers.insert(
            "x-remote-user",
            HeaderValue::from_static("system:kube-aggregator"),
        );
        headers.insert("x-remote-group", HeaderValue::from_static("system:masters"));
        let outgoing = transport::Outgoing {
            method: http::Method::GET,
            uri: path.parse().map_err(|e| format!("invalid path: {e}"))?,
            headers,
            body: Bytes::new(),
        };
        let response = transport::send(pool, to, &outgoing).await?;
        let code = response.status();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok((code, content_type, body))
    };
    tokio::time::timeout(CHECK_TIMEOUT, exchange)
        .await
        .map_err(|_| "context deadline exceeded".to_owned())?
}

/// Sets the `Available` condition of `name`, its transition time moved only when its status
/// changes.
async fn write(
    api: &Api,
    name: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> Result<(), setpoint_core::ApiError> {
    let store = api.registry_store_of("apiregistration.k8s.io", "v1", "apiservices")?;
    let change = |current: &Value| -> Result<Value, setpoint_core::ApiError> {
        let mut next = current.clone();
        let mut conditions: Vec<Value> = next["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let old = conditions.iter().position(|c| c["type"] == "Available");
        let since = match old.map(|i| &conditions[i]) {
            Some(c) if c["status"] == status && c["lastTransitionTime"].is_string() => {
                c["lastTransitionTime"].clone()
            }
            _ => json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        };
        let condition = json!({"type": "Available", "status": status,
            "lastTransitionTime": since, "reason": reason, "message": message});
        match old {
            Some(i) => conditions[i] = condition,
            None => conditions.push(condition),
        }
        next["status"]["conditions"] = json!(conditions);
        Ok(next)
    };
    store
        .update(None, name, Scope::Status, false, &change)
        .await
        .map(|_| ())
}
