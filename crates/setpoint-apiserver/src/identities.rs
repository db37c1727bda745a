//! The users Setpoint's own components act as (contracts of issue 19, kube-controller-manager's
//! `--use-service-account-credentials` and kube-scheduler's names): each built-in loop writes as
//! the ServiceAccount `kube-system/<name>` kube-controller-manager gives that controller, the
//! loops' shared informers read as `system:kube-controller-manager`, the scheduler acts as
//! `system:kube-scheduler`, a node agent as `system:node:<node>` in `system:nodes`. The
//! bootstrap policy (`authz/bootstrap/components/`) grants each of them what it needs and the
//! node authorizer (`authz/node.rs`) recognizes the nodes; the `setpoint` binary builds its
//! in-process clients with these users ([`crate::Api::handle_as`]).

use crate::auth::User;

/// The namespace of the loops' ServiceAccounts.
pub const CONTROLLER_NAMESPACE: &str = "kube-system";
/// The group every ServiceAccount is in.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The prefix of a ServiceAccount's user name.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
/// The user the loops' shared informers read as.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";
/// The scheduler's user.
pub const SCHEDULER_USER: &str = "system:kube-scheduler";
/// The prefix of a node's user name (`system:node:<node>`).
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The group every node is in.
pub const NODES_GROUP: &str = "system:nodes";
/// Who the simulated nodes of `setpoint server --simulated-nodes` act as: one process acting
/// for many nodes cannot be any one of them, so it is a user of its own, granted by RBAC the
/// node rules over every node (`setpoint:simulated-nodes`).
pub const SIMULATED_NODES_USER: &str = "setpoint:simulated-nodes";

/// The ServiceAccounts of the built-in loops (`setpoint_controllers::Loop::service_account`
/// of each controller-manager loop).
pub const CONTROLLER_SERVICE_ACCOUNTS: &[&str] = &[
    "namespace-controller",
    "generic-garbage-collector",
    "replicaset-controller",
    "deployment-controller",
    "job-controller",
    "ttl-after-finished-controller",
    "cronjob-controller",
    "node-controller",
    "horizontal-pod-autoscaler",
    "pid-autoscaler",
    "disruption-controller",
    "service-account-controller",
    "root-ca-cert-publisher",
    "statefulset-controller",
    "daemon-set-controller",
    "persistent-volume-binder",
    "local-path-provisioner",
    "pvc-protection-controller",
    "pv-protection-controller",
    "resourcequota-controller",
    "replication-controller",
    "endpointslice-controller",
    "endpoint-controller",
    "node-ipam-controller",
    "certificate-controller",
    "gitops-source",
    "gitops-sync",
    "service-lb-controller",
    "provider-postgresql",
    "cert-manager",
    "cluster-api",
];

/// The user of the ServiceAccount `kube-system/<service_account>` a built-in loop writes as,
/// in `system:serviceaccounts` and `system:serviceaccounts:kube-system`.
#[must_use]
pub fn controller_user(service_account: &str) -> User {
    service_account_user(CONTROLLER_NAMESPACE, service_account)
}

/// The user of the ServiceAccount `namespace/name` (without its uid).
#[must_use]
pub fn service_account_user(namespace: &str, name: &str) -> User {
    User::new(
        format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
        [
            SERVICE_ACCOUNTS_GROUP.to_owned(),
            format!("{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
        ],
    )
}

/// `system:kube-controller-manager`: the loops' shared informers (reads) and their Lease.
#[must_use]
pub fn controller_manager_user() -> User {
    User::new(CONTROLLER_MANAGER_USER, [])
}

/// `system:kube-scheduler`.
#[must_use]
pub fn scheduler_user() -> User {
    User::new(SCHEDULER_USER, [])
}

/// `system:node:<node>` in `system:nodes`: a node agent.
#[must_use]
pub fn node_user(node: &str) -> User {
    User::new(
        format!("{NODE_USER_PREFIX}{node}"),
        [NODES_GROUP.to_owned()],
    )
}

/// The simulated nodes' user ([`SIMULATED_NODES_USER`]).
#[must_use]
pub fn simulated_nodes_user() -> User {
    User::new(SIMULATED_NODES_USER, [])
}

/// The node a user is, as kube's node identifier decides: a name `system:node:<node>` and the
/// group `system:nodes`. `Some("")` is a node user without a name (refused by the node
/// authorizer), `None` not a node at all.
pub(crate) fn node_of(user: &User) -> Option<&str> {
    let node = user.name.strip_prefix(NODE_USER_PREFIX)?;
    user.in_group(NODES_GROUP).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_of_should_need_both_the_name_and_the_group() {
        assert_eq!(node_of(&node_user("n1")), Some("n1"));
        assert_eq!(node_of(&User::new("system:node:n1", [])), None);
        assert_eq!(node_of(&User::new("alice", [NODES_GROUP.to_owned()])), None);
        let loop_user = controller_user("deployment-controller");
        assert_eq!(
            loop_user.name,
            "system:serviceaccount:kube-system:deployment-controller"
        );
        assert!(loop_user.in_group("system:serviceaccounts:kube-system"));
    }
}
