//! The RBAC decision benchmark's workload (`cargo bench -p setpoint-apiserver --bench authz`):
//! an index holding the default policy and `bindings` RoleBindings (users spread over 100
//! namespaces, each also in one of 50 groups), and the time of each of `decisions` decisions
//! (half allowed by a binding, half refused after looking at every binding of the asker).

use std::time::{Duration, Instant};

use serde_json::json;

use super::rbac::index::{Index, Kind};
use super::{Attributes, Decision};
use crate::auth::User;

/// The duration of each decision, in the order made.
pub fn decision_latencies(bindings: usize, decisions: usize) -> Vec<Duration> {
    let mut index = Index::default();
    for role in super::bootstrap::cluster_roles() {
        let mut role = serde_json::to_value(role).unwrap_or_default();
        if role["metadata"]["name"] == "view" {
            role["rules"] = json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods", "configmaps"]}]);
        }
        index.apply(Kind::ClusterRole, Some(role.to_string().as_bytes()), None);
    }
    for binding in super::bootstrap::cluster_role_bindings() {
        let binding = serde_json::to_value(binding).unwrap_or_default();
        index.apply(
            Kind::ClusterRoleBinding,
            Some(binding.to_string().as_bytes()),
            None,
        );
    }
    let bindings = bindings.max(1);
    for i in 0..bindings {
        let binding = json!({
            "metadata": {"name": format!("rb-{i}"), "namespace": format!("ns-{}", i % 100)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": format!("user-{i}")}, {"kind": "Group", "name": format!("group-{}", i % 50)}],
        });
        index.apply(
            Kind::RoleBinding,
            Some(binding.to_string().as_bytes()),
            None,
        );
    }
    let mut out = Vec::with_capacity(decisions);
    for k in 0..decisions {
        let i = (k * 7919) % bindings;
        let user = User::new(format!("user-{i}"), [format!("group-{}", i % 50)]);
        let (verb, resource) = if k % 2 == 0 {
            ("list", "pods")
        } else {
            ("create", "secrets")
        };
        let attributes =
            Attributes::resource(&user, verb, "", resource, &format!("ns-{}", i % 100), "");
        let started = Instant::now();
        let decision = index.authorize(&attributes);
        out.push(started.elapsed());
        debug_assert_eq!(matches!(decision, Decision::Allow(_)), k % 2 == 0);
    }
    out
}
