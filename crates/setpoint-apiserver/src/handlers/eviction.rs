//! POST `pods/{name}/eviction`: an `Eviction` (policy/v1 or v1beta1, JSON, YAML or protobuf)
//! deletes its pod with the eviction's `deleteOptions`, as kube-apiserver's eviction
//! subresource does (`kubectl drain` uses it when discovery lists `pods/eviction`).
//!
//! Before a real (not dry-run) eviction of a running pod, the pod gets kube-apiserver's
//! `DisruptionTarget` condition (reason `EvictionByEvictionAPI`). Setpoint has no
//! PodDisruptionBudgets yet, so no eviction is refused with 429 for one.

use http::{Response, StatusCode};
use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use super::read::read_object;
use super::response::{self, Body};
use super::write::decode_body;
use super::Ctx;
use crate::registry::meta::{self, meta_str};
use crate::registry::store::delete_options::DeleteOptions;
use crate::registry::store::Scope;

/// The `apiVersion`s an `Eviction` body may name.
const EVICTION_VERSIONS: &[&str] = &["policy/v1", "policy/v1beta1"];

/// Handles `POST pods/{name}/eviction`.
pub(crate) async fn evict(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let eviction = decode_body(ctx)?;
    match (eviction["apiVersion"].as_str(), eviction["kind"].as_str()) {
        (None | Some(""), None | Some("") | Some("Eviction")) => {}
        (Some(av), None | Some("") | Some("Eviction")) if EVICTION_VERSIONS.contains(&av) => {}
        (av, kind) => {
            return Err(ApiError::bad_request(format!(
                "the body of pods/eviction must be a policy/v1 Eviction, not {} {}",
                av.unwrap_or_default(),
                kind.unwrap_or_default()
            )))
        }
    }
    if meta_str(&eviction, "name").unwrap_or_default() != ctx.name() {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = &eviction["deleteOptions"];
    if options["ignoreStoreReadErrorWithClusterBreakingPotential"] == json!(true) {
        return Err(ApiError::invalid(
            "Eviction",
            "policy",
            ctx.name(),
            vec![Cause::invalid(
                "deleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential",
                &json!(true),
                "can not be set for pod eviction, try after removing the option",
            )],
        ));
    }
    let dry_run = dry_run(ctx, options)?;
    let pod = read_object(ctx).await?;
    if !dry_run && !can_ignore_disruption(&pod) {
        mark_disruption_target(ctx).await?;
    }
    let options = DeleteOptions::parse(ctx.query, options)?;
    ctx.store
        .delete(ctx.req.namespace.as_deref(), ctx.name(), &options)
        .await?;
    Ok(response::json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// Whether the eviction is a dry run: `dryRun` from the query or from the `deleteOptions`
/// (kube-apiserver copies one into the other; both can only say `All`).
fn dry_run(ctx: &Ctx<'_>, options: &Value) -> Result<bool, ApiError> {
    let query = ctx.dry_run()?;
    let mut in_body = false;
    for d in options["dryRun"].as_array().into_iter().flatten() {
        match d.as_str() {
            Some("All") => in_body = true,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: {d}: supported values: \"All\""
                )))
            }
        }
    }
    Ok(query || in_body)
}

/// A pod whose eviction disrupts nothing: finished, not yet started, or already going.
fn can_ignore_disruption(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed" | "Pending")
    ) || !pod["metadata"]["deletionTimestamp"].is_null()
}

/// Sets the pod's `DisruptionTarget` condition, as kube-apiserver does before it deletes an
/// evicted pod.
async fn mark_disruption_target(ctx: &Ctx<'_>) -> Result<(), ApiError> {
    ctx.store
        .update(
            ctx.req.namespace.as_deref(),
            ctx.name(),
            Scope::Status,
            false,
            &|current| {
                let mut next = current.clone();
                meta::metadata(&mut next).remove("resourceVersion");
                let mut conditions: Vec<Value> = next["status"]["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                conditions.retain(|c| c["type"] != "DisruptionTarget");
                conditions.push(json!({
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                    "lastTransitionTime": meta::now(),
                    "lastProbeTime": null,
                }));
                next["status"]["conditions"] = json!(conditions);
                Ok(next)
            },
        )
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use http::Request;
    use http_body_util::BodyExt as _;
    use serde_json::{json, Value};
    use setpoint_store::{EmbeddedConfig, EmbeddedStore};

    use crate::handlers::Api;

    const PODS: &str = "/api/v1/namespaces/default/pods";

    async fn api_with_pod(node: Option<&str>) -> Arc<Api> {
        let store = EmbeddedStore::open(EmbeddedConfig::in_memory()).expect("store");
        let api = Api::new(Arc::new(store)).await.expect("api");
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        });
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        let (code, body) = call(&api, "POST", PODS, &pod.to_string()).await;
        assert_eq!(code, 201, "{body}");
        api
    }

    async fn call(api: &Api, method: &str, uri: &str, body: &str) -> (u16, Value) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Bytes::from(body.to_owned()))
            .expect("request");
        let response = api.handle(request).await;
        let code = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    fn eviction(name: &str, options: Value) -> String {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}, "deleteOptions": options})
            .to_string()
    }

    #[tokio::test]
    async fn an_eviction_should_delete_the_pod_and_answer_a_success_status() {
        // Regression (issue 14.8): there was no `pods/eviction`, which `kubectl drain` uses.
        let api = api_with_pod(None).await;
        let (code, body) = call(
            &api,
            "POST",
            &format!("{PODS}/p/eviction"),
            &eviction("p", Value::Null),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(
            body,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        );
        assert_eq!(call(&api, "GET", &format!("{PODS}/p"), "").await.0, 404);
    }

    #[tokio::test]
    async fn an_eviction_of_a_scheduled_pod_should_mark_it_with_its_grace_period() {
        let api = api_with_pod(Some("n1")).await;
        // A running pod: the eviction marks it DisruptionTarget before deleting it.
        let (code, mut pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        assert_eq!(code, 200);
        pod["status"] = json!({"phase": "Running"});
        let status = call(&api, "PUT", &format!("{PODS}/p/status"), &pod.to_string()).await;
        assert_eq!(status.0, 200, "{}", status.1);
        let (code, body) = call(
            &api,
            "POST",
            &format!("{PODS}/p/eviction"),
            &eviction("p", json!({"gracePeriodSeconds": 7})),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (_, pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 7, "{pod}");
        let conditions = pod["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == "DisruptionTarget" && c["reason"] == "EvictionByEvictionAPI"),
            "{pod}"
        );
    }

    #[tokio::test]
    async fn a_dry_run_eviction_should_leave_the_pod() {
        let api = api_with_pod(None).await;
        let (code, body) = call(
            &api,
            "POST",
            &format!("{PODS}/p/eviction"),
            &eviction("p", json!({"dryRun": ["All"]})),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = call(
            &api,
            "POST",
            &format!("{PODS}/p/eviction?dryRun=All"),
            &eviction("p", Value::Null),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(call(&api, "GET", &format!("{PODS}/p"), "").await.0, 200);
    }

    #[tokio::test]
    async fn a_bad_eviction_should_be_refused_like_kube_apiserver() {
        let api = api_with_pod(None).await;
        let uri = format!("{PODS}/p/eviction");
        let (code, body) = call(&api, "POST", &uri, &eviction("q", Value::Null)).await;
        assert_eq!(code, 400, "{body}");
        assert_eq!(
            body["message"],
            "name in URL does not match name in Eviction object"
        );
        let (code, body) = call(
            &api,
            "POST",
            &uri,
            &eviction(
                "p",
                json!({"ignoreStoreReadErrorWithClusterBreakingPotential": true}),
            ),
        )
        .await;
        assert_eq!(code, 422, "{body}");
        let (code, _) = call(
            &api,
            "POST",
            &format!("{PODS}/missing/eviction"),
            &eviction("missing", Value::Null),
        )
        .await;
        assert_eq!(code, 404);
        // Eviction is create-only.
        assert_eq!(call(&api, "GET", &uri, "").await.0, 405);
        assert_eq!(call(&api, "GET", &format!("{PODS}/p"), "").await.0, 200);
    }
}
