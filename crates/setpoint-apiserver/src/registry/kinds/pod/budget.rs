//! The PodDisruptionBudget side of `pods/eviction`: which budgets cover a pod, and the
//! check-and-decrement of a budget's `status.disruptionsAllowed` that admits one eviction, as
//! kube-apiserver's eviction subresource does it.
//!
//! The decrement is a conditional write of the budget's status (the registry store's update
//! re-reads and recomputes on a resource-version conflict), so two evictions racing for the
//! last allowed disruption never both pass. The evicted pod is recorded in
//! `status.disruptedPods` with the time, so the disruption loop does not count it as healthy
//! until it is gone or the entry expires.

use serde_json::{json, Value};
use setpoint_core::{ApiError, Cause, LabelSelector, Reason};

use crate::registry::meta::{self, meta_str};
use crate::registry::store::{RegistryStore, Scope};

/// More entries in `status.disruptedPods` than this and evictions are refused: the disruption
/// loop has not confirmed that many approved evictions (kube-apiserver's `MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// The cause type kube-apiserver gives a refusal for a budget (`policyv1.DisruptionBudgetCause`).
const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";

/// The refusal's message, the line `kubectl drain` prints for each retry.
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The budgets of `pod`'s namespace whose selector matches its labels. In policy/v1 an empty
/// selector (`{}`) covers every pod of the namespace and a missing one none.
pub(crate) async fn covering(pdbs: &RegistryStore, pod: &Value) -> Result<Vec<Value>, ApiError> {
    let namespace = meta_str(pod, "namespace").unwrap_or_default();
    let (objects, _) = pdbs.consistent().await?;
    let mut out = Vec::new();
    for object in objects.values() {
        let Ok(pdb) = serde_json::from_slice::<Value>(&object.json.bytes()) else {
            continue;
        };
        if meta_str(&pdb, "namespace").unwrap_or_default() != namespace {
            continue;
        }
        let Ok(selector) = LabelSelector::from_structured(&pdb["spec"]["selector"]) else {
            continue;
        };
        if !selector.matches_object(pod) {
            continue;
        }
        out.push(pdb);
    }
    Ok(out)
}

/// 500 when more than one budget covers the pod (kube-apiserver's words; its `Status` has no
/// reason, ours says `InternalError`).
pub(crate) fn more_than_one() -> ApiError {
    ApiError::new(
        Reason::InternalError,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
    )
}

/// 429 with a `DisruptionBudget` cause saying `why`, retry after `retry_after` seconds (none: 0).
fn too_many_requests(why: String, retry_after: Option<u32>) -> ApiError {
    ApiError {
        reason: Reason::TooManyRequests,
        message: REFUSED.to_owned(),
        details: Some(Box::new(setpoint_core::Details {
            causes: vec![Cause::new(DISRUPTION_BUDGET_CAUSE, "", why)],
            retry_after_seconds: retry_after,
            ..Default::default()
        })),
    }
}

/// 429: the budget `name`'s status does not reflect its spec yet (or the pod turned ready while
/// it was deleted).
pub(crate) fn still_processing(name: &str) -> ApiError {
    too_many_requests(
        format!("The disruption budget {name} is still being processed by the server."),
        Some(10),
    )
}

/// Whether an unready pod may go without spending the budget: the policy is `AlwaysAllow`, or
/// the budget is met without it (`IfHealthyBudget`, the default).
pub(crate) fn unready_pod_may_go(pdb: &Value) -> bool {
    if pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow" {
        return true;
    }
    let status = &pdb["status"];
    let desired = status["desiredHealthy"].as_i64().unwrap_or(0);
    let current = status["currentHealthy"].as_i64().unwrap_or(0);
    current >= desired && desired > 0
}

/// The budget's status with one more disruption spent on `pod` at `now`, or why not.
fn decremented(pdb: &Value, pod: &str, now: &str, record: bool) -> Result<Value, ApiError> {
    let name = meta_str(pdb, "name").unwrap_or_default();
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    let status = &pdb["status"];
    if status["observedGeneration"].as_i64().unwrap_or(0) < generation {
        return Err(still_processing(name));
    }
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    let gr = setpoint_core::GroupResource::new("policy", "poddisruptionbudget");
    if allowed < 0 {
        return Err(ApiError::forbidden_object(
            &gr,
            name,
            "pdb disruptions allowed is negative",
        ));
    }
    let disrupted = status["disruptedPods"].as_object().map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(ApiError::forbidden_object(
            &gr,
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status["desiredHealthy"].as_i64().unwrap_or(0),
                status["currentHealthy"].as_i64().unwrap_or(0)
            ),
            None,
        ));
    }
    let mut next = pdb.clone();
    meta::metadata(&mut next).remove("resourceVersion");
    next["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        set_insufficient(&mut next["status"], now);
    }
    if record {
        if !next["status"]["disruptedPods"].is_object() {
            next["status"]["disruptedPods"] = json!({});
        }
        next["status"]["disruptedPods"][pod] = json!(now);
    }
    Ok(next)
}

/// Sets the `DisruptionAllowed` condition to `False, InsufficientPods` (its transition time
/// moves only when its status changes).
fn set_insufficient(status: &mut Value, now: &str) {
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let previous = conditions
        .iter()
        .find(|c| c["type"] == "DisruptionAllowed")
        .cloned();
    conditions.retain(|c| c["type"] != "DisruptionAllowed");
    let since = match &previous {
        Some(p) if p["status"] == "False" => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    conditions.push(json!({
        "type": "DisruptionAllowed",
        "status": "False",
        "observedGeneration": status["observedGeneration"],
        "lastTransitionTime": since,
        "reason": "InsufficientPods",
        "message": "",
    }));
    status["conditions"] = json!(conditions);
}

/// Spends one disruption of the budget `pdb` (as read) on the pod `pod`: refuses with 429 when
/// none is allowed or the status is stale; otherwise writes the decrement and the pod's
/// `disruptedPods` entry, re-reading the budget on a conflict. A dry run only checks.
pub(crate) async fn check_and_decrement(
    pdbs: &RegistryStore,
    pdb: &Value,
    pod: &str,
    dry_run: bool,
) -> Result<(), ApiError> {
    let now = meta::now();
    if dry_run {
        return decremented(pdb, pod, &now, false).map(drop);
    }
    let namespace = meta_str(pdb, "namespace").map(str::to_owned);
    let name = meta_str(pdb, "name").unwrap_or_default().to_owned();
    pdbs.update(namespace.as_deref(), &name, Scope::Status, false, &|current| {
        decremented(current, pod, &now, true)
    })
    .await
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(allowed: i64, generation: i64, observed: i64) -> Value {
        json!({
            "metadata": {"name": "b", "namespace": "default", "generation": generation},
            "spec": {"minAvailable": 2},
            "status": {"disruptionsAllowed": allowed, "desiredHealthy": 2, "currentHealthy": 2,
                       "expectedPods": 3, "observedGeneration": observed},
        })
    }

    #[test]
    fn a_spent_budget_should_be_refused_with_kube_apiservers_cause() {
        let e = decremented(&pdb(0, 1, 1), "p", "t", true).unwrap_err();
        assert_eq!(e.code(), 429);
        let status = e.to_status();
        assert_eq!(status["message"], REFUSED);
        assert_eq!(
            status["details"]["causes"],
            json!([{"reason": "DisruptionBudget", "message": "The disruption budget b needs 2 healthy pods and has 2 currently"}])
        );
    }

    #[test]
    fn a_stale_budget_should_be_refused_until_it_is_processed() {
        let e = decremented(&pdb(1, 2, 1), "p", "t", true).unwrap_err();
        assert_eq!(e.code(), 429);
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 10);
    }

    #[test]
    fn a_decrement_should_record_the_pod_and_mark_the_budget_spent() {
        let next = decremented(&pdb(1, 1, 1), "p", "t", true).unwrap();
        assert_eq!(next["status"]["disruptionsAllowed"], 0);
        assert_eq!(next["status"]["disruptedPods"]["p"], "t");
        assert_eq!(next["status"]["conditions"][0]["reason"], "InsufficientPods");
        let dry = decremented(&pdb(2, 1, 1), "p", "t", false).unwrap();
        assert_eq!(dry["status"]["disruptionsAllowed"], 1);
        assert!(dry["status"]["disruptedPods"].is_null());
    }

    #[test]
    fn an_unready_pod_should_go_freely_only_when_the_budget_allows() {
        let mut b = pdb(0, 1, 1);
        assert!(unready_pod_may_go(&b));
        b["status"]["currentHealthy"] = json!(1);
        assert!(!unready_pod_may_go(&b));
        b["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        assert!(unready_pod_may_go(&b));
    }
}
