//! `pods/eviction`: an `Eviction` deletes its pod with the eviction's `deleteOptions`, as
//! kube-apiserver's eviction subresource does (`kubectl drain` uses it when discovery lists
//! `pods/eviction`).
//!
//! Before a real (not dry-run) eviction of a running pod, the pod gets kube-apiserver's
//! `DisruptionTarget` condition (reason `EvictionByEvictionAPI`). Setpoint has no
//! PodDisruptionBudgets yet, so no eviction is refused with 429 for one.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause};

use crate::registry::meta::{self, meta_str};
use crate::registry::store::delete_options::DeleteOptions;
use crate::registry::store::{dry_run_of, RegistryStore, Scope};

/// The `apiVersion`s an `Eviction` body may name.
const EVICTION_VERSIONS: &[&str] = &["policy/v1", "policy/v1beta1"];

/// Evicts the pod `name` of `namespace` as `eviction` (an `Eviction`) asks; `query` is the
/// request's query string (its `dryRun` and delete options count too).
pub(crate) async fn evict(
    pods: &RegistryStore,
    namespace: Option<&str>,
    name: &str,
    eviction: &Value,
    query: &BTreeMap<String, String>,
) -> Result<(), ApiError> {
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
    if meta_str(eviction, "name").unwrap_or_default() != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = &eviction["deleteOptions"];
    if options["ignoreStoreReadErrorWithClusterBreakingPotential"] == json!(true) {
        return Err(ApiError::invalid(
            "Eviction",
            "policy",
            name,
            vec![Cause::invalid(
                "deleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential",
                &json!(true),
                "can not be set for pod eviction, try after removing the option",
            )],
        ));
    }
    let dry_run = dry_run(query, options)?;
    // Options that would refuse the delete are refused before the pod is marked.
    let options = DeleteOptions::parse(query, options)?;
    let pod = pods.get(namespace, name).await?;
    if !dry_run && !can_ignore_disruption(&pod) {
        mark_disruption_target(pods, namespace, name).await?;
    }
    pods.delete(namespace, name, &options).await?;
    Ok(())
}

/// Whether the eviction is a dry run: `dryRun` from the query or from the `deleteOptions`
/// (kube-apiserver copies one into the other; both can only say `All`).
fn dry_run(query: &BTreeMap<String, String>, options: &Value) -> Result<bool, ApiError> {
    let query = dry_run_of(query)?;
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
async fn mark_disruption_target(
    pods: &RegistryStore,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    pods.update(
        namespace,
        name,
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

