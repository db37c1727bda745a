//! The roles of Setpoint's own components (each built-in loop's `system:controller:<sa>`, the
//! controller manager's and the scheduler's), least-privilege, and their bindings. Owned by
//! the identities part; the bootstrap policy (`mod.rs`) includes them.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

/// The components' ClusterRoles.
pub(crate) fn cluster_roles() -> Vec<ClusterRole> {
    Vec::new()
}

/// The components' ClusterRoleBindings.
pub(crate) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    Vec::new()
}
