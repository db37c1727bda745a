//! POST `pods/{name}/eviction`: decodes the `Eviction` (policy/v1 or v1beta1, JSON, YAML or
//! protobuf) and has the pod registry evict (`registry/kinds/pod/eviction.rs`), giving it the
//! PodDisruptionBudgets' registry store to check and spend budgets in.

use http::{Response, StatusCode};
use serde_json::json;
use setpoint_core::ApiError;

use super::response::{self, Body};
use super::write::decode_body;
use super::Ctx;

/// Handles `POST pods/{name}/eviction`.
pub(crate) async fn evict(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let eviction = decode_body(ctx)?;
    let pdbs = ctx
        .api
        .registry_store_of("policy", "v1", "poddisruptionbudgets")
        .ok();
    crate::registry::evict_pod(
        ctx.store,
        pdbs.as_deref(),
        ctx.req.namespace.as_deref(),
        ctx.name(),
        &eviction,
        ctx.query,
    )
    .await?;
    Ok(response::json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
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

    const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

    /// A running, ready pod `p` labelled `app=a`, and a budget `b` over `app=a` whose status
    /// (as the disruption loop would write it) allows `allowed` disruptions.
    async fn api_with_budget(allowed: i64) -> Arc<Api> {
        let api = api_with_pod(Some("n1")).await;
        let (_, mut pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        pod["metadata"]["labels"] = json!({"app": "a"});
        let (code, mut pod) = call(&api, "PUT", &format!("{PODS}/p"), &pod.to_string()).await;
        assert_eq!(code, 200, "{pod}");
        pod["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        let (code, body) = call(&api, "PUT", &format!("{PODS}/p/status"), &pod.to_string()).await;
        assert_eq!(code, 200, "{body}");
        add_budget(&api, "b", allowed, 1).await;
        api
    }

    async fn add_budget(api: &Api, name: &str, allowed: i64, observed: i64) {
        let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}});
        let (code, mut pdb) = call(api, "POST", PDBS, &pdb.to_string()).await;
        assert_eq!(code, 201, "{pdb}");
        pdb["status"] = json!({"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1,
            "expectedPods": 1, "observedGeneration": observed});
        let (code, body) = call(
            api,
            "PUT",
            &format!("{PDBS}/{name}/status"),
            &pdb.to_string(),
        )
        .await;
        assert_eq!(code, 200, "{body}");
    }

    #[tokio::test]
    async fn a_spent_budget_should_refuse_the_eviction_with_429_and_kube_apiservers_cause() {
        let api = api_with_budget(0).await;
        let uri = format!("{PODS}/p/eviction");
        let (code, body) = call(&api, "POST", &uri, &eviction("p", Value::Null)).await;
        assert_eq!(code, 429, "{body}");
        assert_eq!(body["reason"], "TooManyRequests");
        assert_eq!(
            body["message"],
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(
            body["details"]["causes"],
            json!([{"reason": "DisruptionBudget", "message": "The disruption budget b needs 1 healthy pods and has 1 currently"}])
        );
        let (code, pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        assert_eq!(code, 200);
        assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
    }

    #[tokio::test]
    async fn an_allowed_eviction_should_spend_the_budget_and_record_the_pod() {
        let api = api_with_budget(1).await;
        let uri = format!("{PODS}/p/eviction");
        // A dry run checks and writes nothing.
        let (code, body) = call(
            &api,
            "POST",
            &format!("{uri}?dryRun=All"),
            &eviction("p", Value::Null),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (_, pdb) = call(&api, "GET", &format!("{PDBS}/b"), "").await;
        assert_eq!(pdb["status"]["disruptionsAllowed"], 1, "{pdb}");
        assert!(pdb["status"]["disruptedPods"].is_null(), "{pdb}");
        let (_, pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");

        let (code, body) = call(&api, "POST", &uri, &eviction("p", Value::Null)).await;
        assert_eq!(code, 201, "{body}");
        let (_, pdb) = call(&api, "GET", &format!("{PDBS}/b"), "").await;
        assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
        assert!(pdb["status"]["disruptedPods"]["p"].is_string(), "{pdb}");
        let (_, pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    }

    #[tokio::test]
    async fn a_stale_budget_or_two_budgets_should_refuse_the_eviction() {
        let api = api_with_budget(1).await;
        let uri = format!("{PODS}/p/eviction");
        // The budget's spec changed and the loop has not seen it yet.
        let (_, mut pdb) = call(&api, "GET", &format!("{PDBS}/b"), "").await;
        pdb["spec"]["minAvailable"] = json!(0);
        let (code, body) = call(&api, "PUT", &format!("{PDBS}/b"), &pdb.to_string()).await;
        assert_eq!(code, 200, "{body}");
        let (code, body) = call(&api, "POST", &uri, &eviction("p", Value::Null)).await;
        assert_eq!(code, 429, "{body}");
        assert_eq!(
            body["details"]["causes"][0]["message"],
            "The disruption budget b is still being processed by the server."
        );
        // Its retry period is a Retry-After header too.
        let request = Request::builder()
            .method("POST")
            .uri(&uri)
            .header("content-type", "application/json")
            .body(Bytes::from(eviction("p", Value::Null)))
            .expect("request");
        let response = api.handle(request).await;
        assert_eq!(response.status().as_u16(), 429);
        assert_eq!(
            response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("10")
        );
        add_budget(&api, "c", 1, 1).await;
        let (code, body) = call(&api, "POST", &uri, &eviction("p", Value::Null)).await;
        assert_eq!(code, 500, "{body}");
        assert_eq!(
            body["message"],
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        );
    }

    #[tokio::test]
    async fn an_unready_pod_should_go_when_the_budget_is_met_without_it() {
        let api = api_with_budget(0).await;
        let (_, mut pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        pod["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
        let (code, body) = call(&api, "PUT", &format!("{PODS}/p/status"), &pod.to_string()).await;
        assert_eq!(code, 200, "{body}");
        // currentHealthy 1 >= desiredHealthy 1: the unready pod spends nothing.
        let (code, body) = call(
            &api,
            "POST",
            &format!("{PODS}/p/eviction"),
            &eviction("p", Value::Null),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        let (_, pdb) = call(&api, "GET", &format!("{PDBS}/b"), "").await;
        assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
        assert!(pdb["status"]["disruptedPods"].is_null(), "{pdb}");
    }

    #[tokio::test]
    async fn an_unready_pod_under_a_short_budget_should_go_only_if_the_policy_always_allows() {
        let api = api_with_budget(0).await;
        let (_, mut pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        pod["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
        let (code, body) = call(&api, "PUT", &format!("{PODS}/p/status"), &pod.to_string()).await;
        assert_eq!(code, 200, "{body}");
        // The budget is short (0 of 1 healthy): IfHealthyBudget keeps the unready pod.
        let (_, mut pdb) = call(&api, "GET", &format!("{PDBS}/b"), "").await;
        pdb["status"]["currentHealthy"] = json!(0);
        let (code, body) = call(&api, "PUT", &format!("{PDBS}/b/status"), &pdb.to_string()).await;
        assert_eq!(code, 200, "{body}");
        let uri = format!("{PODS}/p/eviction");
        let (code, body) = call(&api, "POST", &uri, &eviction("p", Value::Null)).await;
        assert_eq!(code, 429, "{body}");
        // AlwaysAllow lets it go without spending anything.
        let (_, mut pdb) = call(&api, "GET", &format!("{PDBS}/b"), "").await;
        pdb["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        let (code, body) = call(&api, "PUT", &format!("{PDBS}/b"), &pdb.to_string()).await;
        assert_eq!(code, 200, "{body}");
        let (code, body) = call(&api, "POST", &uri, &eviction("p", Value::Null)).await;
        assert_eq!(code, 201, "{body}");
    }

    #[tokio::test]
    async fn a_stale_resource_version_precondition_should_conflict_and_keep_the_pod() {
        let api = api_with_budget(1).await;
        let (code, body) = call(
            &api,
            "POST",
            &format!("{PODS}/p/eviction"),
            &eviction("p", json!({"preconditions": {"resourceVersion": "1"}})),
        )
        .await;
        assert_eq!(code, 409, "{body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("Operation cannot be fulfilled on Pod \"p\": the ResourceVersion in the precondition (1) does not match"),
            "{body}"
        );
        let (_, pod) = call(&api, "GET", &format!("{PODS}/p"), "").await;
        assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
    }
}
