//! rbac.authorization.k8s.io/v1: Role and ClusterRole (`role.rs`), RoleBinding and
//! ClusterRoleBinding (`binding.rs`). Stored only: Setpoint authorizes every authenticated
//! user as an administrator, so these objects are kept and validated but grant nothing yet.
//! Their names are path segments (`system:controller:x`), as kube-apiserver's RBAC names are.

mod binding;
mod role;

use crate::registry::ResourceDef;

/// The group every role reference and user or group subject names.
const GROUP: &str = "rbac.authorization.k8s.io";

pub(crate) fn resources() -> Vec<ResourceDef> {
    vec![
        role::resource(false),
        role::resource(true),
        binding::resource(false),
        binding::resource(true),
    ]
}
