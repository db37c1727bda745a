//! The bootstrap policy: the default ClusterRoles and ClusterRoleBindings (`policy.rs`, plus
//! the components' from `components.rs`), created at every start when missing and
//! auto-reconciled when annotated `rbac.authorization.kubernetes.io/autoupdate: "true"`, as
//! kube-apiserver's `rbac/bootstrap-roles` post-start hook does: missing rules (of a role
//! without an aggregation rule), aggregation selectors, labels, annotations and binding subjects
//! are added, nothing is removed. An object annotated `"false"` is left as the user made it.

pub(crate) mod components;
mod policy;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::Metadata;
use serde_json::{json, Value};
use setpoint_core::{ApiError, Reason};

pub(crate) use policy::AUTOUPDATE;

use crate::authz::rbac::rules::uncovered;
use crate::registry::store::{RegistryStore, Scope};

const GROUP: &str = "rbac.authorization.k8s.io";

/// The default ClusterRoles: kube's and the components' (a component's role of the same name
/// wins).
pub(crate) fn cluster_roles() -> Vec<ClusterRole> {
    with_components(policy::cluster_roles(), components::cluster_roles())
}

/// The default ClusterRoleBindings: kube's and the components' (likewise).
pub(crate) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    with_components(
        policy::cluster_role_bindings(),
        components::cluster_role_bindings(),
    )
}

/// `defaults` without those a component's object of the same name replaces, then `components`.
fn with_components<K: Metadata<Ty = ObjectMeta>>(defaults: Vec<K>, components: Vec<K>) -> Vec<K> {
    let mut all: Vec<K> = defaults
        .into_iter()
        .filter(|d| {
            !components
                .iter()
                .any(|c| c.metadata().name == d.metadata().name)
        })
        .collect();
    all.extend(components);
    all
}

/// Creates the missing default objects and reconciles the auto-updated ones.
/// `roles` and `bindings` are the ClusterRoles' and ClusterRoleBindings' registry stores.
pub(crate) async fn ensure(
    roles: &RegistryStore,
    bindings: &RegistryStore,
) -> Result<(), ApiError> {
    for role in cluster_roles() {
        let mut object =
            serde_json::to_value(&role).map_err(|e| ApiError::internal(e.to_string()))?;
        object["apiVersion"] = json!(format!("{GROUP}/v1"));
        object["kind"] = json!("ClusterRole");
        ensure_one(roles, object, reconcile_role).await?;
    }
    for binding in cluster_role_bindings() {
        let mut object =
            serde_json::to_value(&binding).map_err(|e| ApiError::internal(e.to_string()))?;
        object["apiVersion"] = json!(format!("{GROUP}/v1"));
        object["kind"] = json!("ClusterRoleBinding");
        ensure_one(bindings, object, reconcile_binding).await?;
    }
    Ok(())
}

/// Creates `expected` if missing; otherwise, if auto-updated, changes it by `reconcile`.
async fn ensure_one(
    store: &RegistryStore,
    expected: Value,
    reconcile: fn(&Value, &Value) -> Option<Value>,
) -> Result<(), ApiError> {
    let name = expected["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let current = match store.get(None, &name).await {
        Ok(current) => current,
        Err(e) if e.reason == Reason::NotFound => {
            return match store.create(None, expected, false).await {
                Ok(_) => Ok(()),
                Err(e) if e.reason == Reason::AlreadyExists => Ok(()),
                Err(e) => Err(e),
            };
        }
        Err(e) => return Err(e),
    };
    if current["metadata"]["annotations"][AUTOUPDATE] != "true"
        || reconcile(&current, &expected).is_none()
    {
        return Ok(());
    }
    let change =
        |current: &Value| Ok(reconcile(current, &expected).unwrap_or_else(|| current.clone()));
    match store.update(None, &name, Scope::Main, false, &change).await {
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::warn!(%name, error = %e, "default RBAC object not reconciled");
            Ok(())
        }
    }
}

/// Adds `expected`'s labels and annotations missing from `current` (`true` if any).
fn merge_meta(current: &mut Value, expected: &Value) -> bool {
    let mut changed = false;
    for field in ["labels", "annotations"] {
        let Some(wanted) = expected["metadata"][field].as_object() else {
            continue;
        };
        for (k, v) in wanted {
            if current["metadata"][field].get(k).is_none() {
                if !current["metadata"][field].is_object() {
                    current["metadata"][field] = json!({});
                }
                current["metadata"][field][k] = v.clone();
                changed = true;
            }
        }
    }
    changed
}

fn items(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// The ClusterRole `current` with what `expected` has and it lacks, or `None` if nothing.
fn reconcile_role(current: &Value, expected: &Value) -> Option<Value> {
    let mut out = current.clone();
    let mut changed = merge_meta(&mut out, expected);
    let selectors = &expected["aggregationRule"]["clusterRoleSelectors"];
    if selectors.is_array() {
        let mut have = items(&out["aggregationRule"]["clusterRoleSelectors"]);
        for selector in items(selectors) {
            if !have.contains(&selector) {
                have.push(selector);
                changed = true;
            }
        }
        out["aggregationRule"] = json!({"clusterRoleSelectors": have});
    } else {
        let parse = |v: &Value| {
            serde_json::from_value::<Vec<k8s_openapi::api::rbac::v1::PolicyRule>>(v.clone())
                .unwrap_or_default()
        };
        let have = parse(&out["rules"]);
        let mut rules = items(&out["rules"]);
        for rule in items(&expected["rules"]) {
            if !uncovered(&have, &parse(&json!([rule.clone()]))).is_empty() {
                rules.push(rule);
                changed = true;
            }
        }
        out["rules"] = json!(rules);
    }
    changed.then_some(out)
}

/// The ClusterRoleBinding `current` with `expected`'s missing subjects, or `None` if nothing.
fn reconcile_binding(current: &Value, expected: &Value) -> Option<Value> {
    let mut out = current.clone();
    let mut changed = merge_meta(&mut out, expected);
    let mut subjects = items(&out["subjects"]);
    for subject in items(&expected["subjects"]) {
        let same = |s: &Value| {
            s["kind"] == subject["kind"]
                && s["name"] == subject["name"]
                && s["namespace"] == subject["namespace"]
        };
        if !subjects.iter().any(same) {
            subjects.push(subject);
            changed = true;
        }
    }
    out["subjects"] = json!(subjects);
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciling_should_add_missing_rules_subjects_and_labels_only() {
        let expected = serde_json::to_value(policy::role(
            "r",
            vec![crate::authz::rbac::rules::rule(&["get"], &[""], &["pods"])],
        ))
        .unwrap();
        let current = json!({"metadata": {"name": "r", "labels": {"mine": "x"}}, "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}]});
        let out = reconcile_role(&current, &expected).unwrap();
        assert_eq!(out["rules"].as_array().unwrap().len(), 2);
        assert_eq!(out["metadata"]["labels"]["mine"], "x");
        assert_eq!(out["metadata"]["annotations"][AUTOUPDATE], "true");
        assert!(reconcile_role(&out, &expected).is_none());
        let expected = serde_json::to_value(policy::binding("b", &["g1", "g2"])).unwrap();
        let current = json!({"metadata": {"name": "b"}, "subjects": [{"kind": "Group", "name": "g1", "apiGroup": GROUP}, {"kind": "User", "name": "u"}]});
        let out = reconcile_binding(&current, &expected).unwrap();
        assert_eq!(out["subjects"].as_array().unwrap().len(), 3);
        assert!(reconcile_binding(&out, &expected).is_none());
    }
}
