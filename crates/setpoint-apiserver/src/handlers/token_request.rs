//! POST `serviceaccounts/{name}/token` (TokenRequest, `kubectl create token`): issues a bound
//! ServiceAccount token, as kube-apiserver's TokenREST. The body's name and namespace, if given,
//! must be the ServiceAccount's; `spec.expirationSeconds` defaults to 3600 and must be at least
//! 600 (and at most 2^32), and a longer one than `--service-account-max-token-expiration` is
//! shortened with a warning; `spec.audiences` default to the API audiences;
//! `spec.boundObjectRef` may name a `v1` Pod (running as this ServiceAccount; its node is
//! recorded too), Secret or Node, whose `uid`, if given, must be the object's (409 otherwise).
//! Answers `201` with the request, `status.token` and `status.expirationTimestamp`; nothing is
//! stored.

use chrono::{TimeZone as _, Utc};
use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause, GroupResource};

use super::response::{self, Body};
use super::write::{decode_body, with_warnings};
use super::Ctx;
use crate::auth::service_account::{BoundKind, BoundToken, NameUid};

/// kube's default `expirationSeconds`.
const DEFAULT_EXPIRATION: i64 = 3600;
/// The shortest token issued.
const MIN_EXPIRATION: i64 = 600;
/// The longest token that may be asked for.
const MAX_EXPIRATION: i64 = 1 << 32;

fn invalid(name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid("TokenRequest", "authentication.k8s.io", name, causes)
}

/// The name and uid of an object as served.
fn name_uid(object: &Value) -> NameUid {
    NameUid {
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        uid: object["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Handles `POST serviceaccounts/{name}/token`.
pub(crate) async fn create(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let name = ctx.name();
    let namespace = ctx.req.namespace.clone().unwrap_or_default();
    let mut request = decode_body(ctx)?;
    if !request.is_object() {
        return Err(ApiError::bad_request("the body must be a TokenRequest"));
    }
    let meta = &request["metadata"];
    if let Some(given) = meta["name"].as_str().filter(|n| !n.is_empty()) {
        if given != name {
            let cause = Cause::invalid(
                "metadata.name",
                &json!(given),
                "must match the service account name if specified",
            );
            return Err(invalid(name, vec![cause]));
        }
    }
    if let Some(given) = meta["namespace"].as_str().filter(|n| !n.is_empty()) {
        if given != namespace {
            let cause = Cause::invalid(
                "metadata.namespace",
                &json!(given),
                "must match the service account namespace if specified",
            );
            return Err(invalid(name, vec![cause]));
        }
    }
    let mut expiration = match &request["spec"]["expirationSeconds"] {
        Value::Null => DEFAULT_EXPIRATION,
        value => value
            .as_i64()
            .ok_or_else(|| ApiError::bad_request("spec.expirationSeconds must be an integer"))?,
    };
    if expiration < MIN_EXPIRATION {
        let cause = Cause::invalid(
            "spec.expirationSeconds",
            &json!(expiration),
            "may not specify a duration less than 10 minutes",
        );
        return Err(invalid(name, vec![cause]));
    }
    if expiration > MAX_EXPIRATION {
        let cause = Cause::invalid(
            "spec.expirationSeconds",
            &json!(expiration),
            "may not specify a duration larger than 2^32 seconds",
        );
        return Err(invalid(name, vec![cause]));
    }
    let account = ctx.store.get(Some(&namespace), name).await?;
    let authenticator = ctx
        .api
        .authenticator()
        .ok_or_else(|| ApiError::internal("no ServiceAccount signing key"))?;
    let mut audiences: Vec<String> = request["spec"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    if audiences.is_empty() {
        audiences = authenticator.audiences().to_vec();
    }
    let (bound, pod_node) =
        bound_object(ctx, &namespace, name, &request["spec"]["boundObjectRef"]).await?;
    let mut warnings = Vec::new();
    if let Some(max) = authenticator.max_expiration().filter(|m| *m > 0) {
        if expiration > max {
            warnings.push(format!(
                "requested expiration of {expiration} seconds shortened to {max} seconds"
            ));
            expiration = max;
        }
    }
    let spec = BoundToken {
        namespace: namespace.clone(),
        service_account: name_uid(&account),
        audiences: audiences.clone(),
        expiration_seconds: expiration,
        bound,
        pod_node,
    };
    let (token, expires) = authenticator
        .issue(&spec)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let now = Utc::now();
    let expires_at = Utc
        .timestamp_opt(expires, 0)
        .single()
        .unwrap_or(now)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] = json!({
        "name": name,
        "namespace": namespace,
        "creationTimestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    request["spec"]["audiences"] = json!(audiences);
    request["spec"]["expirationSeconds"] = json!(expiration);
    if request["spec"]["boundObjectRef"].is_null() {
        if let Some(spec) = request["spec"].as_object_mut() {
            spec.remove("boundObjectRef");
        }
    }
    request["status"] = json!({"token": token, "expirationTimestamp": expires_at});
    Ok(with_warnings(
        response::json(StatusCode::CREATED, &request),
        &warnings,
    ))
}

/// The object `reference` binds the token to (checked: exists, uid matches, a pod runs as
/// `account`), and for a pod its node.
async fn bound_object(
    ctx: &Ctx<'_>,
    namespace: &str,
    account: &str,
    reference: &Value,
) -> Result<(Option<(BoundKind, NameUid)>, Option<NameUid>), ApiError> {
    if reference.is_null() {
        return Ok((None, None));
    }
    let kind_name = reference["kind"].as_str().unwrap_or_default();
    let api_version = reference["apiVersion"].as_str().unwrap_or("v1");
    let kind = BoundKind::parse(kind_name)
        .filter(|_| api_version == "v1" || api_version.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "cannot bind token for object of kind {kind_name:?}"
            ))
        })?;
    let object_name = reference["name"].as_str().unwrap_or_default();
    if object_name.is_empty() {
        let cause = Cause::required("spec.boundObjectRef.name");
        return Err(invalid(account, vec![cause]));
    }
    let store = ctx.api.registry_store_of("", "v1", kind.resource())?;
    let object_namespace = (kind != BoundKind::Node).then_some(namespace);
    let object = store.get(object_namespace, object_name).await?;
    let found = name_uid(&object);
    if let Some(uid) = reference["uid"].as_str().filter(|u| !u.is_empty()) {
        if uid != found.uid {
            return Err(ApiError::conflict(
                &GroupResource::new("", kind_name),
                object_name,
                &format!("the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"),
            ));
        }
    }
    let mut pod_node = None;
    if kind == BoundKind::Pod {
        let runs_as = object["spec"]["serviceAccountName"]
            .as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        if runs_as != account {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
            )));
        }
        if let Some(node_name) = object["spec"]["nodeName"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            let uid = match ctx.api.registry_store_of("", "v1", "nodes") {
                Ok(nodes) => nodes
                    .get(None, node_name)
                    .await
                    .ok()
                    .map(|n| name_uid(&n).uid)
                    .unwrap_or_default(),
                Err(_) => String::new(),
            };
            pod_node = Some(NameUid {
                name: node_name.to_owned(),
                uid,
            });
        }
    }
    Ok((Some((kind, found)), pod_node))
}
