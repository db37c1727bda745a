//! ClusterRole aggregation, run inside the API server as kube-controller-manager's
//! `clusterrole-aggregation` controller: a ClusterRole with `aggregationRule.clusterRoleSelectors`
//! has as its rules those of every other ClusterRole whose labels match one of the selectors
//! (in name order, each rule once), so `admin`, `edit` and `view` gather the
//! `rbac.authorization.k8s.io/aggregate-to-*` roles, the defaults and the users' alike.
//! Level-triggered: every change to a ClusterRole re-checks every aggregated one; a role already
//! right is not written.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use setpoint_core::LabelSelector;

use crate::api::Api;
use crate::registry::store::{RegistryStore, Scope};
use crate::watchcache::Filter;

/// Starts the aggregation loop; it ends when the API is dropped.
pub(crate) fn start(api: &Arc<Api>) {
    tokio::spawn(run(Arc::downgrade(api)));
}

fn cluster_roles(api: &Api) -> Option<Arc<RegistryStore>> {
    api.registry_store_of("rbac.authorization.k8s.io", "v1", "clusterroles")
        .ok()
}

async fn run(api: Weak<Api>) {
    loop {
        let Some(store) = api.upgrade().and_then(|a| cluster_roles(&a)) else {
            return;
        };
        let cache = store.cache().clone();
        drop(store);
        if !cache.is_ready() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let from = cache.revision();
        let Ok(mut watcher) = cache.watch(from, Filter::default()) else {
            continue;
        };
        drop(cache);
        if let Some(a) = api.upgrade() {
            reconcile_all(&a).await;
        }
        // Wait for a change to the ClusterRoles, then look again.
        loop {
            match watcher.next().await {
                Ok(events) if events.is_empty() => {}
                Ok(_) => break,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
            if api.strong_count() == 0 {
                return;
            }
        }
    }
}

/// Brings every aggregated ClusterRole's rules in line with the roles it selects.
pub(crate) async fn reconcile_all(api: &Api) {
    let Some(store) = cluster_roles(api) else {
        return;
    };
    let (objects, _) = store.cache().snapshot();
    let roles: Vec<(Value, std::collections::BTreeMap<String, String>)> = objects
        .values()
        .filter_map(|o| {
            Some((
                serde_json::from_slice::<Value>(&o.json).ok()?,
                o.labels.clone(),
            ))
        })
        .collect();
    for (role, _) in &roles {
        let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
            continue;
        };
        let name = role["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let selectors: Vec<LabelSelector> = selectors
            .iter()
            .filter_map(|s| LabelSelector::from_structured(s).ok())
            .collect();
        let rules = aggregated_rules(&name, &selectors, &roles);
        if role["rules"]
            .as_array()
            .map_or(rules.is_empty(), |have| *have == rules)
        {
            continue;
        }
        let change = |current: &Value| {
            let mut next = current.clone();
            next["rules"] = json!(rules);
            Ok(next)
        };
        if let Err(error) = store.update(None, &name, Scope::Main, false, &change).await {
            tracing::warn!(role = %name, %error, "aggregated ClusterRole not updated");
        }
    }
}

/// The rules of the roles (other than `name`) that one of `selectors` selects, by role name,
/// each rule once (an empty selector selects every role, as kube's does).
fn aggregated_rules(
    name: &str,
    selectors: &[LabelSelector],
    roles: &[(Value, std::collections::BTreeMap<String, String>)],
) -> Vec<Value> {
    let mut selected: Vec<&Value> = roles
        .iter()
        .filter(|(role, labels)| {
            role["metadata"]["name"] != name && selectors.iter().any(|s| s.matches(labels))
        })
        .map(|(role, _)| role)
        .collect();
    selected.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    let mut rules: Vec<Value> = Vec::new();
    for role in selected {
        for rule in role["rules"].as_array().into_iter().flatten() {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_rules_should_gather_the_selected_roles_in_name_order_once() {
        let role = |name: &str, label: &str, verb: &str| {
            (
                json!({"metadata": {"name": name}, "rules": [{"verbs": [verb], "apiGroups": [""], "resources": ["pods"]}]}),
                std::collections::BTreeMap::from([(label.to_owned(), "true".to_owned())]),
            )
        };
        let roles = vec![
            role("b", "agg", "list"),
            role("a", "agg", "get"),
            role("c", "other", "delete"),
            role("d", "agg", "get"),
        ];
        let selector =
            LabelSelector::from_structured(&json!({"matchLabels": {"agg": "true"}})).unwrap();
        let rules = aggregated_rules("x", &[selector], &roles);
        let verbs: Vec<&Value> = rules.iter().map(|r| &r["verbs"][0]).collect();
        assert_eq!(verbs, [&json!("get"), &json!("list")]);
    }
}
