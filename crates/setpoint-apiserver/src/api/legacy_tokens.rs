//! Legacy ServiceAccount token Secrets, only on request: when a user creates a Secret of type
//! `kubernetes.io/service-account-token` annotated `kubernetes.io/service-account.name`, this
//! in-apiserver loop (kube-controller-manager's tokens controller, for that case only) fills
//! its `token` (a non-expiring legacy JWT naming the Secret), `ca.crt` (the cluster CA, when the
//! API is served) and `namespace`, and records the ServiceAccount's uid in the annotation
//! `kubernetes.io/service-account.uid`. Nothing creates such Secrets automatically; their
//! tokens authenticate while the Secret (holding that token) and the ServiceAccount exist
//! (`auth/service_account.rs`). A Secret naming a missing ServiceAccount is left alone until it
//! appears (the loop looks again on the Secret's next change or after falling behind).
//!
//! The loop waits until the API's authenticator has been built from the cluster's
//! credentials (or first used, in an API never served), so that it signs with the key that
//! verifies.

use std::sync::{Arc, Weak};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Reason};

use super::Api;
use crate::auth::service_account::NameUid;
use crate::auth::TokenAuthenticator;
use crate::registry::store::{RegistryStore, Scope};
use crate::watchcache::{EventType, Filter};

/// The Secret type of legacy tokens.
const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotations naming the ServiceAccount.
const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// How often the loop checks that the API is still there (and, before it can sign, whether
/// it can now).
const RECHECK: Duration = Duration::from_secs(1);

/// Starts the loop (a task that ends with the API).
pub(crate) fn start(api: &Arc<Api>) {
    tokio::spawn(follow(Arc::downgrade(api)));
}

/// Fills every Secret that asks, then follows the Secrets' events; again from the start when
/// the watch falls behind. Ends when the API is gone.
async fn follow(api: Weak<Api>) {
    let mut tick = tokio::time::interval(RECHECK);
    loop {
        tick.tick().await;
        let Some(a) = api.upgrade() else { return };
        let Some(authenticator) = a.token_authenticator.get().cloned() else {
            continue;
        };
        let (Ok(secrets), Ok(accounts)) = (
            a.registry_store_of("", "v1", "secrets"),
            a.registry_store_of("", "v1", "serviceaccounts"),
        ) else {
            return;
        };
        drop(a);
        let cache = secrets.cache().clone();
        if !cache.is_ready() {
            continue;
        }
        let (objects, start) = cache.snapshot();
        for object in objects.values() {
            let secret: Value = serde_json::from_slice(&object.json.bytes()).unwrap_or(Value::Null);
            fill(&authenticator, &secrets, &accounts, &secret).await;
        }
        let Ok(mut watcher) = cache.watch(start, Filter::default()) else {
            continue;
        };
        drop(cache);
        loop {
            tokio::select! {
                events = watcher.next() => {
                    if api.upgrade().is_none() {
                        return;
                    }
                    let Ok(events) = events else { break };
                    for e in events.iter().filter(|e| e.kind != EventType::Deleted) {
                        let secret: Value = serde_json::from_slice(&e.object.json.bytes()).unwrap_or(Value::Null);
                        fill(&authenticator, &secrets, &accounts, &secret).await;
                    }
                }
                _ = tick.tick() => {
                    if api.upgrade().is_none() {
                        return;
                    }
                }
            }
        }
    }
}

/// Whether `secret` asks for a token it does not have yet.
fn wants_token(secret: &Value) -> bool {
    secret["type"] == TOKEN_TYPE
        && secret["metadata"]["deletionTimestamp"].is_null()
        && secret["metadata"]["annotations"][NAME_ANNOTATION]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        && secret["data"]["token"].as_str().is_none_or(str::is_empty)
}

/// Fills `secret`'s token if it asks for one; failures are logged (the next change retries).
async fn fill(
    authenticator: &TokenAuthenticator,
    secrets: &RegistryStore,
    accounts: &RegistryStore,
    secret: &Value,
) {
    if !wants_token(secret) {
        return;
    }
    if let Err(error) = try_fill(authenticator, secrets, accounts, secret).await {
        tracing::warn!(%error, secret = %secret["metadata"]["name"], "cannot fill a legacy ServiceAccount token Secret");
    }
}

async fn try_fill(
    authenticator: &TokenAuthenticator,
    secrets: &RegistryStore,
    accounts: &RegistryStore,
    secret: &Value,
) -> Result<(), ApiError> {
    let meta = &secret["metadata"];
    let namespace = meta["namespace"].as_str().unwrap_or_default();
    let name = meta["name"].as_str().unwrap_or_default();
    let account_name = meta["annotations"][NAME_ANNOTATION]
        .as_str()
        .unwrap_or_default();
    let account = match accounts.get(Some(namespace), account_name).await {
        Ok(account) => account,
        Err(e) if e.reason == Reason::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let uid = account["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if meta["annotations"][UID_ANNOTATION]
        .as_str()
        .is_some_and(|given| !given.is_empty() && given != uid)
    {
        return Ok(()); // it names another (older) ServiceAccount of that name
    }
    let account = NameUid {
        name: account_name.to_owned(),
        uid: uid.clone(),
    };
    let token = authenticator
        .issue_legacy(namespace, &account, name)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let ca = authenticator.ca_pem().map(str::to_owned);
    let change = move |current: &Value| -> Result<Value, ApiError> {
        let mut next = current.clone();
        if !wants_token(&next) {
            return Ok(next);
        }
        next["metadata"]["annotations"][UID_ANNOTATION] = json!(uid);
        if !next["data"].is_object() {
            next["data"] = json!({});
        }
        next["data"]["token"] = json!(STANDARD.encode(&token));
        next["data"]["namespace"] = json!(STANDARD.encode(namespace));
        if let Some(ca) = &ca {
            next["data"]["ca.crt"] = json!(STANDARD.encode(ca));
        }
        Ok(next)
    };
    match secrets
        .update(Some(namespace), name, Scope::Main, false, &change)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.reason == Reason::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
