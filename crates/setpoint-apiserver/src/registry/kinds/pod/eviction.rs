//! `pods/eviction`: an `Eviction` deletes its pod with the eviction's `deleteOptions`, unless
//! a PodDisruptionBudget forbids it, as kube-apiserver's eviction subresource does (`kubectl
//! drain` uses it when discovery lists `pods/eviction`).
//!
//! A pod that disrupts nothing when it goes (finished, `Pending`, already terminating) is
//! deleted without looking at budgets. Otherwise the budget covering it (`budget.rs`; more
//! than one: 500) must allow a disruption: one is spent by a conditional write of the budget's
//! status before the delete, or the eviction is refused with 429 `TooManyRequests`. An unready
//! pod may go without spending one when the budget is met without it or its
//! `unhealthyPodEvictionPolicy` is `AlwaysAllow`; its delete is then conditional on the pod's
//! resource version, so a pod that turned ready meanwhile is refused (429) instead.
//!
//! Before a real (not dry-run) delete the pod gets kube-apiserver's `DisruptionTarget`
//! condition (reason `EvictionByEvictionAPI`). A dry run checks everything and writes nothing.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause, Reason};

use super::budget;

use crate::registry::meta::{self, meta_str};
use crate::registry::store::delete_options::DeleteOptions;
use crate::registry::store::{dry_run_of, RegistryStore, Scope, Updated};

/// The `apiVersion`s an `Eviction` body may name.
const EVICTION_VERSIONS: &[&str] = &["policy/v1", "policy/v1beta1"];

/// Evicts the pod `name` of `namespace` as `eviction` (an `Eviction`) asks, unless the
/// PodDisruptionBudget in `pdbs` (the budgets' registry store; `None`: not served) covering it
/// forbids it; `query` is the request's query string (its `dryRun` and delete options count).
pub(crate) async fn evict(
    pods: &RegistryStore,
    pdbs: Option<&RegistryStore>,
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
    let mut options = DeleteOptions::parse(query, options)?;
    options.dry_run = dry_run;
    let client_rv = options.precondition_rv.is_some();
    // A pod that may go without a budget: deleted at once (conditionally on its version when it
    // could still turn ready); on a conflict it is read again, and may need a budget then.
    let mut attempts = 0;
    let pod = loop {
        let pod = pods.get(namespace, name).await?;
        if !can_ignore_budget(&pod) {
            break pod;
        }
        let mut options = options.clone();
        if should_enforce_version(&pod) && !client_rv {
            options.precondition_rv = meta_str(&pod, "resourceVersion").map(str::to_owned);
        }
        match mark_and_delete(pods, namespace, name, &options).await {
            Err(e) if e.reason == Reason::Conflict && !client_rv && attempts < CONFLICT_RETRIES => {
                attempts += 1;
            }
            other => return other,
        }
    };
    let Some(pdbs) = pdbs else {
        return mark_and_delete(pods, namespace, name, &options).await;
    };
    let budgets = budget::covering(pdbs, &pod).await?;
    let pdb = match budgets.as_slice() {
        [] => return mark_and_delete(pods, namespace, name, &options).await,
        [pdb] => pdb,
        _ => return Err(budget::more_than_one()),
    };
    let pdb_name = meta_str(pdb, "name").unwrap_or_default().to_owned();
    if !is_ready(&pod) && budget::unready_pod_may_go(pdb) {
        let mut conditional = options.clone();
        if !client_rv {
            conditional.precondition_rv = meta_str(&pod, "resourceVersion").map(str::to_owned);
        }
        return match mark_and_delete(pods, namespace, name, &conditional).await {
            Err(e) if e.reason == Reason::Conflict && !client_rv => {
                Err(budget::still_processing(&pdb_name))
            }
            other => other,
        };
    }
    budget::check_and_decrement(pdbs, pdb, name, dry_run).await?;
    mark_and_delete(pods, namespace, name, &options).await
}

/// How often an eviction of a pod that needs no budget is retried when the pod changed under
/// it (kube-apiserver's `EvictionsRetry` has 20 steps).
const CONFLICT_RETRIES: u32 = 20;

/// Marks the pod `DisruptionTarget` (unless a dry run) and deletes it with `options`. A
/// resource-version precondition is checked by the marking and then carried to the marked
/// version, as kube-apiserver does.
async fn mark_and_delete(
    pods: &RegistryStore,
    namespace: Option<&str>,
    name: &str,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let mut options = options.clone();
    if !options.dry_run {
        let marked = mark_disruption_target(pods, namespace, name, &options).await?;
        if options.precondition_rv.is_some() {
            options.precondition_rv = meta_str(&marked, "resourceVersion").map(str::to_owned);
        }
    }
    pods.delete(namespace, name, &options).await.map(drop)
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
fn can_ignore_budget(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed" | "Pending") | None
    ) || !pod["metadata"]["deletionTimestamp"].is_null()
}

/// Whether a budget-free delete must be conditional on the pod's version: it is neither
/// finished nor terminating, so it could turn ready meanwhile.
fn should_enforce_version(pod: &Value) -> bool {
    !matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) && pod["metadata"]["deletionTimestamp"].is_null()
}

/// Whether the pod's `Ready` condition is `True` (what a budget counts as healthy).
pub(crate) fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Sets the pod's `DisruptionTarget` condition, as kube-apiserver does before it deletes an
/// evicted pod; the options' UID and resource-version preconditions must hold (else 409).
/// Returns the pod as marked.
async fn mark_disruption_target(
    pods: &RegistryStore,
    namespace: Option<&str>,
    name: &str,
    options: &DeleteOptions,
) -> Result<Value, ApiError> {
    // kube-apiserver names the resource `Pod` in these conflicts.
    let gr = setpoint_core::GroupResource::new("", "Pod");
    let updated = pods
        .update(namespace, name, Scope::Status, false, &|current| {
            let rv = meta_str(current, "resourceVersion").unwrap_or_default();
            let uid = meta_str(current, "uid").unwrap_or_default();
            if options.precondition_uid.as_deref().is_some_and(|u| !u.is_empty() && u != uid) {
                return Err(ApiError::conflict(&gr, name, &format!(
                    "the UID in the precondition ({}) does not match the UID in record ({uid}). The object might have been deleted and then recreated",
                    options.precondition_uid.as_deref().unwrap_or_default()
                )));
            }
            if options.precondition_rv.as_deref().is_some_and(|r| !r.is_empty() && r != rv) {
                return Err(ApiError::conflict(&gr, name, &format!(
                    "the ResourceVersion in the precondition ({}) does not match the ResourceVersion in record ({rv}). The object might have been modified",
                    options.precondition_rv.as_deref().unwrap_or_default()
                )));
            }
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
        })
        .await?;
    Ok(match updated {
        Updated::Stored(v) | Updated::Deleted(v) => v,
    })
}
