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

use crate::registry::store::{RegistryStore, Scope};
use crate::watchcache::Filter;

/// How often a quiet loop checks that its API is still there.
const ALIVE_CHECK: Duration = Duration::from_secs(1);

/// Starts the aggregation loop over the ClusterRoles' registry store; it ends when the store
/// is dropped (with its API).
pub(crate) fn start(cluster_roles: &Arc<RegistryStore>) {
    tokio::spawn(run(Arc::downgrade(cluster_roles)));
}

async fn run(store: Weak<RegistryStore>) {
    loop {
        let Some(cache) = store.upgrade().map(|s| s.cache().clone()) else {
            return;
        };
        if !cache.is_ready() {
            drop(cache);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let Ok(mut watcher) = cache.watch(cache.revision(), Filter::default()) else {
            continue;
        };
        drop(cache);
        match store.upgrade() {
            Some(s) => reconcile_all(&s).await,
            None => return,
        }
        // Wait for a change to the ClusterRoles, then look again.
        loop {
            tokio::select! {
                events = watcher.next() => match events {
                    Ok(events) if events.is_empty() => {}
                    Ok(_) => break,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        break;
                    }
                },
                () = tokio::time::sleep(ALIVE_CHECK) => {}
            }
            if store.strong_count() == 0 {
                return;
            }
        }
    }
}

/// Brings every aggregated ClusterRole's rules in line with the roles it selects.
pub(crate) async fn reconcile_all(store: &RegistryStore) {
    let (objects, _) = store.cache().snapshot();
    let roles: Vec<(Value, std::collections::BTreeMap<String, String>)> = objects
        .values()
        .filter_map(|o| {
            Some((
                serde_json::from_slice::<Value>(&o.json.bytes()).ok()?,
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
