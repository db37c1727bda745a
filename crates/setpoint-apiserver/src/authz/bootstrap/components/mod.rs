//! The ClusterRoles and ClusterRoleBindings of Setpoint's own components, each identity of
//! `identities.rs` allowed what its code calls and no more (derived from each loop's client
//! calls, informers and subresources; named as kube's bootstrap policy names them):
//!
//! - `system:controller:<sa>` bound to the ServiceAccount `kube-system/<sa>` of each built-in
//!   loop (what it writes, and what it reads with its own client; the shared informers read
//!   as the controller manager),
//! - `system:kube-controller-manager` (list and watch everything: the shared informers; its
//!   Lease `setpoint-controller-manager`), bound to the user of that name,
//! - `system:kube-scheduler` and `system:volume-scheduler` (its Lease `setpoint-scheduler`,
//!   bindings, claims' selected node), bound to `system:kube-scheduler`,
//! - `system:node`: the rules every node has, kept unbound as kube keeps it (the node
//!   authorizer grants them, narrowed by its graph),
//! - `setpoint:simulated-nodes`: the simulated nodes' process, which acts for many nodes.
//!
//! Every loop also records Events (`events.k8s.io` and core). Discovery (`/api`, `/apis`) is
//! open to every authenticated user (`system:discovery`).

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::identities::{
    CONTROLLER_MANAGER_USER, CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNTS, SCHEDULER_USER,
    SIMULATED_NODES_USER,
};

mod controllers;

use controllers::controller_rules;

/// `get`, `list`, `watch`.
const READ: &[&str] = &["get", "list", "watch"];
/// The Lease the controller manager's loops are elected by (`setpoint server`'s roles).
const CONTROLLER_MANAGER_LEASE: &str = "setpoint-controller-manager";
/// The scheduler's Lease.
const SCHEDULER_LEASE: &str = "setpoint-scheduler";
/// The name of the volume scheduler's role.
const VOLUME_SCHEDULER: &str = "system:volume-scheduler";
/// The name of the role every node has through the node authorizer.
const NODE_ROLE: &str = "system:node";

/// A rule: `verbs` on `resources` of `groups`.
fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    let strings = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..PolicyRule::default()
    }
}

/// A rule on the objects named `names` only.
fn named(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(names.iter().map(|s| (*s).to_owned()).collect()),
        ..rule(verbs, groups, resources)
    }
}

/// Recording Events, in both APIs (the SDK's recorder writes `events.k8s.io`; kube's
/// components still use core Events).
fn events() -> PolicyRule {
    rule(
        &["create", "update", "patch"],
        &["", "events.k8s.io"],
        &["events"],
    )
}

/// The rules of `system:kube-controller-manager`: the shared informers and the Lease.
fn controller_manager_rules() -> Vec<PolicyRule> {
    vec![
        events(),
        rule(&["list", "watch"], &["*"], &["*"]),
        rule(&["create"], &["coordination.k8s.io"], &["leases"]),
        named(
            &["get", "update", "patch"],
            &["coordination.k8s.io"],
            &["leases"],
            &[CONTROLLER_MANAGER_LEASE],
        ),
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
    ]
}

/// The rules of `system:kube-scheduler`.
fn scheduler_rules() -> Vec<PolicyRule> {
    vec![
        events(),
        rule(&["create"], &["coordination.k8s.io"], &["leases"]),
        named(
            &["get", "update", "patch"],
            &["coordination.k8s.io"],
            &["leases"],
            &[SCHEDULER_LEASE],
        ),
        rule(READ, &[""], &["nodes", "namespaces"]),
        rule(&["get", "list", "watch", "delete"], &[""], &["pods"]),
        rule(&["create"], &[""], &["pods/binding", "bindings"]),
        rule(&["update", "patch"], &[""], &["pods/status"]),
        rule(
            &["list", "watch"],
            &[""],
            &["replicationcontrollers", "services"],
        ),
        rule(
            &["list", "watch"],
            &["apps"],
            &["replicasets", "statefulsets"],
        ),
        rule(&["list", "watch"], &["policy"], &["poddisruptionbudgets"]),
        rule(
            READ,
            &[""],
            &["persistentvolumes", "persistentvolumeclaims"],
        ),
        rule(READ, &["storage.k8s.io"], &["storageclasses", "csinodes"]),
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
    ]
}

/// The rules of `system:volume-scheduler`: the claims' selected node.
fn volume_scheduler_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &["get", "list", "watch", "patch", "update"],
            &[""],
            &["persistentvolumes", "persistentvolumeclaims"],
        ),
        rule(READ, &["storage.k8s.io"], &["storageclasses"]),
    ]
}

/// The rules of `setpoint:simulated-nodes`.
fn simulated_nodes_rules() -> Vec<PolicyRule> {
    vec![
        events(),
        rule(
            &["create", "get", "list", "watch", "update", "patch"],
            &[""],
            &["nodes"],
        ),
        rule(
            &["update", "patch"],
            &[""],
            &["nodes/status", "pods/status"],
        ),
        rule(&["get", "list", "watch", "delete"], &[""], &["pods"]),
        rule(
            &["get", "create", "update", "patch", "delete"],
            &["coordination.k8s.io"],
            &["leases"],
        ),
    ]
}

/// kube's bootstrap metadata: the label of default policy, and auto-reconciled.
fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(BTreeMap::from([(
            "kubernetes.io/bootstrapping".to_owned(),
            "rbac-defaults".to_owned(),
        )])),
        annotations: Some(BTreeMap::from([(
            "rbac.authorization.kubernetes.io/autoupdate".to_owned(),
            "true".to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

fn role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name),
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

fn binding(name: &str, role: &str, subject: Subject) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(name),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![subject]),
    }
}

fn user(name: &str) -> Subject {
    Subject {
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        kind: "User".to_owned(),
        name: name.to_owned(),
        namespace: None,
    }
}

/// The rules every node has (the node authorizer's static rules, and the reads its graph
/// narrows), as the role `system:node` shows them.
fn node_rules() -> Vec<PolicyRule> {
    let mut rules: Vec<PolicyRule> = crate::authz::node::NODE_RULES
        .iter()
        .map(|(verbs, group, resources)| rule(verbs, &[group], resources))
        .collect();
    rules.push(rule(READ, &[""], &["secrets", "configmaps"]));
    rules.push(rule(
        &["get"],
        &[""],
        &["persistentvolumeclaims", "persistentvolumes"],
    ));
    rules.push(rule(
        &["update", "patch"],
        &[""],
        &["persistentvolumeclaims/status"],
    ));
    rules.push(rule(&["create"], &[""], &["serviceaccounts/token"]));
    rules.push(rule(
        &["get", "create", "update", "patch", "delete"],
        &["coordination.k8s.io"],
        &["leases"],
    ));
    rules
}

/// The components' ClusterRoles.
pub(crate) fn cluster_roles() -> Vec<ClusterRole> {
    let mut roles: Vec<ClusterRole> = CONTROLLER_SERVICE_ACCOUNTS
        .iter()
        .map(|sa| role(&format!("system:controller:{sa}"), controller_rules(sa)))
        .collect();
    roles.push(role(CONTROLLER_MANAGER_USER, controller_manager_rules()));
    roles.push(role(SCHEDULER_USER, scheduler_rules()));
    roles.push(role(VOLUME_SCHEDULER, volume_scheduler_rules()));
    roles.push(role(NODE_ROLE, node_rules()));
    roles.push(role(SIMULATED_NODES_USER, simulated_nodes_rules()));
    roles
}

/// The components' ClusterRoleBindings (`system:node` is left unbound).
pub(crate) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    let mut bindings: Vec<ClusterRoleBinding> = CONTROLLER_SERVICE_ACCOUNTS
        .iter()
        .map(|sa| {
            let name = format!("system:controller:{sa}");
            binding(
                &name,
                &name,
                Subject {
                    api_group: None,
                    kind: "ServiceAccount".to_owned(),
                    name: (*sa).to_owned(),
                    namespace: Some(CONTROLLER_NAMESPACE.to_owned()),
                },
            )
        })
        .collect();
    bindings.push(binding(
        CONTROLLER_MANAGER_USER,
        CONTROLLER_MANAGER_USER,
        user(CONTROLLER_MANAGER_USER),
    ));
    bindings.push(binding(
        SCHEDULER_USER,
        SCHEDULER_USER,
        user(SCHEDULER_USER),
    ));
    bindings.push(binding(
        VOLUME_SCHEDULER,
        VOLUME_SCHEDULER,
        user(SCHEDULER_USER),
    ));
    bindings.push(binding(
        SIMULATED_NODES_USER,
        SIMULATED_NODES_USER,
        user(SIMULATED_NODES_USER),
    ));
    bindings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_should_have_rules_beyond_events_and_a_binding() {
        for sa in CONTROLLER_SERVICE_ACCOUNTS {
            assert!(
                controller_rules(sa).len() > 1,
                "{sa} has no rules of its own"
            );
        }
        let roles = cluster_roles();
        for b in cluster_role_bindings() {
            assert!(
                roles
                    .iter()
                    .any(|r| r.metadata.name.as_deref() == Some(&b.role_ref.name)),
                "{:?} binds a missing role",
                b.metadata.name
            );
        }
        assert!(
            !cluster_role_bindings()
                .iter()
                .any(|b| b.role_ref.name == NODE_ROLE),
            "system:node stays unbound"
        );
    }
}
