//! Which objects a quota applies to: its `scopes` and `scopeSelector` (`Terminating`,
//! `NotTerminating`, `BestEffort`, `NotBestEffort`, `PriorityClass`,
//! `CrossNamespacePodAffinity`). Scopes are about pods: a scoped quota applies to no other
//! kind.

use serde_json::Value;

/// A pod is best effort when none of its containers requests or limits CPU or memory.
pub fn is_best_effort(pod: &Value) -> bool {
    let spec = &pod["spec"];
    let containers = spec["containers"].as_array().into_iter().flatten();
    let init = spec["initContainers"].as_array().into_iter().flatten();
    !containers.chain(init).any(|c| {
        ["requests", "limits"].iter().any(|k| {
            let list = &c["resources"][k];
            list.get("cpu").is_some() || list.get("memory").is_some()
        })
    })
}

fn is_terminating(pod: &Value) -> bool {
    pod["spec"]["activeDeadlineSeconds"]
        .as_i64()
        .is_some_and(|s| s >= 0)
}

fn cross_namespace_affinity(pod: &Value) -> bool {
    let affinity = &pod["spec"]["affinity"];
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let a = &affinity[kind];
        let required = a["requiredDuringSchedulingIgnoredDuringExecution"].as_array();
        let preferred = a["preferredDuringSchedulingIgnoredDuringExecution"].as_array();
        let crosses = |t: &Value| {
            t["namespaces"].as_array().is_some_and(|n| !n.is_empty())
                || !t["namespaceSelector"].is_null()
        };
        required.into_iter().flatten().any(crosses)
            || preferred
                .into_iter()
                .flatten()
                .any(|w| crosses(&w["podAffinityTerm"]))
    })
}

/// Whether one scope (with its selector's operator and values) matches `object`.
fn scope_matches(
    scope: &str,
    operator: &str,
    values: &[&str],
    is_pod: bool,
    object: &Value,
) -> bool {
    if !is_pod {
        return false;
    }
    match scope {
        "Terminating" => is_terminating(object),
        "NotTerminating" => !is_terminating(object),
        "BestEffort" => is_best_effort(object),
        "NotBestEffort" => !is_best_effort(object),
        "CrossNamespacePodAffinity" => cross_namespace_affinity(object),
        "PriorityClass" => {
            let class = object["spec"]["priorityClassName"]
                .as_str()
                .filter(|c| !c.is_empty());
            match (operator, class) {
                ("Exists", c) => c.is_some(),
                ("DoesNotExist", c) => c.is_none(),
                ("In", Some(c)) => values.contains(&c),
                ("In", None) => false,
                ("NotIn", Some(c)) => !values.contains(&c),
                ("NotIn", None) => true,
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether `quota`'s scopes and scope selector all match `object` (of resource `plural` in
/// the core group when `is_pod`).
pub fn matches_scopes(quota: &Value, is_pod: bool, object: &Value) -> bool {
    let spec = &quota["spec"];
    let scopes = spec["scopes"].as_array().into_iter().flatten();
    for scope in scopes.filter_map(Value::as_str) {
        let operator = if scope == "PriorityClass" {
            "Exists"
        } else {
            ""
        };
        if !scope_matches(scope, operator, &[], is_pod, object) {
            return false;
        }
    }
    let expressions = spec["scopeSelector"]["matchExpressions"].as_array();
    for e in expressions.into_iter().flatten() {
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let scope = e["scopeName"].as_str().unwrap_or_default();
        let operator = e["operator"].as_str().unwrap_or_default();
        if !scope_matches(scope, operator, &values, is_pod, object) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_should_select_pods_by_qos_deadline_and_priority() {
        let best = json!({"spec": {"containers": [{"name": "a"}]}});
        let burst = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}], "activeDeadlineSeconds": 5, "priorityClassName": "high"}});
        let q = |spec: Value| json!({"spec": spec});
        assert!(matches_scopes(
            &q(json!({"scopes": ["BestEffort"]})),
            true,
            &best
        ));
        assert!(!matches_scopes(
            &q(json!({"scopes": ["BestEffort"]})),
            true,
            &burst
        ));
        assert!(matches_scopes(
            &q(json!({"scopes": ["Terminating", "NotBestEffort"]})),
            true,
            &burst
        ));
        let high = q(
            json!({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
        );
        assert!(matches_scopes(&high, true, &burst));
        assert!(!matches_scopes(&high, true, &best));
        assert!(
            !matches_scopes(&q(json!({"scopes": ["BestEffort"]})), false, &json!({})),
            "scopes are about pods"
        );
        assert!(matches_scopes(&q(json!({})), false, &json!({})));
    }
}
