//! kube-apiserver's default API Priority and Fairness configuration (Kubernetes 1.33): the
//! mandatory objects (`exempt` and `catch-all`, levels and schemas) and the suggested ones
//! (levels `system`, `node-high`, `leader-election`, `workload-high`, `workload-low`,
//! `global-default`; their FlowSchemas, and `probes`), each annotated
//! `apf.kubernetes.io/autoupdate-spec: "true"` so the server keeps its spec current.
//!
//! With Setpoint's identities (`docs/design/flowcontrol.md`): the admin and the server's own
//! clients (`system:masters`) are exempt; node agents (`system:nodes`) go to `node-high` for
//! their Node and Lease and `system` otherwise; the built-in loops' ServiceAccounts in
//! `kube-system` to `leader-election` for their leases and `workload-high` otherwise, as do the
//! loops' informers (`system:kube-controller-manager`) and the scheduler; other
//! ServiceAccounts to `workload-low`; everyone else to `global-default`.

use k8s_openapi::api::flowcontrol::v1 as fc;
use serde_json::{json, Value};

/// The annotation saying the server may rewrite the object's spec.
pub(crate) const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

fn level(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "annotations": {AUTO_UPDATE: "true"}},
        "spec": spec,
    })
}

fn queued(shares: i32, lendable: i32, queues: i32, hand_size: i32) -> Value {
    json!({
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": {
                "type": "Queue",
                "queuing": {"queues": queues, "handSize": hand_size, "queueLengthLimit": 50},
            },
        },
    })
}

fn schema(name: &str, level: &str, precedence: i32, by: Option<&str>, rules: Value) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": rules,
    });
    if let Some(by) = by {
        spec["distinguisherMethod"] = json!({"type": by});
    }
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name, "annotations": {AUTO_UPDATE: "true"}},
        "spec": spec,
    })
}

fn groups(names: &[&str]) -> Value {
    names
        .iter()
        .map(|n| json!({"kind": "Group", "group": {"name": n}}))
        .collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "User", "user": {"name": n}}))
        .collect()
}

fn kube_system_service_accounts(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": n}}))
        .collect()
}

/// Every verb on every resource and non-resource URL, for `subjects`.
fn everything(subjects: Value) -> Value {
    json!([{
        "subjects": subjects,
        "resourceRules": [{
            "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
            "namespaces": ["*"], "clusterScope": true,
        }],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    }])
}

fn resource_rule(
    verbs: &[&str],
    group: &str,
    resources: &[&str],
    namespaces: &[&str],
    cluster: bool,
) -> Value {
    json!({
        "verbs": verbs, "apiGroups": [group], "resources": resources,
        "namespaces": namespaces, "clusterScope": cluster,
    })
}

/// The mandatory PriorityLevelConfigurations, as JSON.
fn mandatory_level_values() -> Vec<Value> {
    vec![
        level(
            "exempt",
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
        level(
            "catch-all",
            json!({"type": "Limited", "limited": {
                "nominalConcurrencyShares": 5, "lendablePercent": 0,
                "limitResponse": {"type": "Reject"},
            }}),
        ),
    ]
}

/// The mandatory FlowSchemas, as JSON.
fn mandatory_schema_values() -> Vec<Value> {
    vec![
        schema(
            "exempt",
            "exempt",
            1,
            None,
            everything(groups(&["system:masters"])),
        ),
        schema(
            "catch-all",
            "catch-all",
            10_000,
            Some("ByUser"),
            everything(groups(&["system:unauthenticated", "system:authenticated"])),
        ),
    ]
}

/// Every default PriorityLevelConfiguration (mandatory first), as JSON.
pub(crate) fn level_values() -> Vec<Value> {
    let mut all = mandatory_level_values();
    all.extend([
        level("system", queued(30, 33, 64, 6)),
        level("node-high", queued(40, 25, 64, 6)),
        level("leader-election", queued(10, 0, 16, 4)),
        level("workload-high", queued(40, 50, 128, 6)),
        level("workload-low", queued(100, 90, 128, 6)),
        level("global-default", queued(20, 50, 128, 6)),
    ]);
    all
}

/// Every default FlowSchema (mandatory first), as JSON.
pub(crate) fn schema_values() -> Vec<Value> {
    let election_verbs = ["get", "create", "update"];
    let mut controller_manager_and_scheduler =
        users(&["system:kube-controller-manager", "system:kube-scheduler"]);
    controller_manager_and_scheduler.extend(kube_system_service_accounts(&["*"]));
    let mut endpoint_writers = users(&["system:kube-controller-manager"]);
    endpoint_writers.extend(kube_system_service_accounts(&[
        "endpoint-controller",
        "endpointslicemirroring-controller",
    ]));
    let mut all = mandatory_schema_values();
    all.extend([
        schema(
            "probes",
            "exempt",
            2,
            None,
            json!([{
                "subjects": groups(&["system:unauthenticated", "system:authenticated"]),
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
            }]),
        ),
        schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            json!([{
                "subjects": controller_manager_and_scheduler,
                "resourceRules": [
                    resource_rule(&election_verbs, "", &["endpoints", "configmaps"], &["kube-system"], false),
                    resource_rule(&election_verbs, "coordination.k8s.io", &["leases"], &["*"], false),
                ],
            }]),
        ),
        schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            json!([{
                "subjects": endpoint_writers,
                "resourceRules": [
                    resource_rule(&["get", "create", "update"], "", &["endpoints"], &["*"], false),
                ],
            }]),
        ),
        schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            json!([{
                "subjects": kube_system_service_accounts(&["*"]),
                "resourceRules": [
                    resource_rule(&election_verbs, "", &["endpoints", "configmaps"], &["*"], false),
                    resource_rule(&election_verbs, "coordination.k8s.io", &["leases"], &["*"], false),
                ],
            }]),
        ),
        schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!([{
                "subjects": groups(&["system:nodes"]),
                "resourceRules": [
                    resource_rule(&["*"], "", &["nodes", "nodes/status"], &["*"], true),
                    resource_rule(&["*"], "coordination.k8s.io", &["leases"], &["*"], false),
                ],
            }]),
        ),
        schema("system-nodes", "system", 500, Some("ByUser"), everything(groups(&["system:nodes"]))),
        schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(Value::Array(users(&["system:kube-controller-manager"]))),
        ),
        schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(Value::Array(users(&["system:kube-scheduler"]))),
        ),
        schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(Value::Array(kube_system_service_accounts(&["*"]))),
        ),
        schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            everything(groups(&["system:serviceaccounts"])),
        ),
        schema(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            everything(groups(&["system:unauthenticated", "system:authenticated"])),
        ),
    ]);
    all
}

/// The mandatory levels, typed (used when the store lacks them).
pub(crate) fn mandatory_levels() -> Vec<fc::PriorityLevelConfiguration> {
    mandatory_level_values()
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

/// The mandatory schemas, typed (used when the store lacks them).
pub(crate) fn mandatory_schemas() -> Vec<fc::FlowSchema> {
    mandatory_schema_values()
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_object_should_decode_as_its_kind() {
        for v in level_values() {
            serde_json::from_value::<fc::PriorityLevelConfiguration>(v).unwrap();
        }
        for v in schema_values() {
            serde_json::from_value::<fc::FlowSchema>(v).unwrap();
        }
        assert_eq!(mandatory_levels().len(), 2);
        assert_eq!(mandatory_schemas().len(), 2);
    }
}
