//! The authorizer chain of an `Api`, as kube-apiserver's `--authorization-mode=Node,RBAC` with
//! its privileged group: members of `system:masters` may do anything; then the node authorizer
//! and RBAC are asked in turn, the first to allow or deny deciding. When none has an opinion
//! the request is refused, the reasons given joined.

use std::sync::Arc;

use setpoint_core::ApiError;

use super::node::NodeAuthorizer;
use super::rbac::RbacAuthorizer;
use super::{Attributes, Authorizer, Decision};
use crate::watchcache::WatchCache;

/// The group whose members may do anything (kube-apiserver's privileged group).
pub(crate) const MASTERS_GROUP: &str = "system:masters";

/// The authorizers, asked in order.
pub(crate) struct Chain {
    node: NodeAuthorizer,
    rbac: Arc<RbacAuthorizer>,
}

impl Chain {
    /// The chain `[system:masters → node authorizer → rbac]`.
    pub(crate) fn new(node: NodeAuthorizer, rbac: Arc<RbacAuthorizer>) -> Self {
        Chain { node, rbac }
    }

    /// The chain over the watch caches of the RBAC kinds (RBAC) and of pods and claims (the
    /// node authorizer), found by `cache_of` (group, plural resource name → cache); 500 if one
    /// is missing.
    pub(crate) fn over(
        cache_of: impl Fn(&str, &str) -> Option<Arc<WatchCache>>,
    ) -> Result<Self, ApiError> {
        let cache = |group: &str, plural: &str| {
            cache_of(group, plural).ok_or_else(|| {
                ApiError::internal(format!("no {plural} resource to authorize from"))
            })
        };
        let rbac = |plural: &str| cache("rbac.authorization.k8s.io", plural);
        let [a, b, c, d] = super::rbac::RESOURCES;
        let caches = [rbac(a)?, rbac(b)?, rbac(c)?, rbac(d)?];
        let node = NodeAuthorizer::new(cache("", "pods")?, cache("", "persistentvolumeclaims")?);
        Ok(Chain::new(node, Arc::new(RbacAuthorizer::new(caches))))
    }

    /// The RBAC authorizer (for rules reviews and escalation checks).
    pub(crate) fn rbac(&self) -> &Arc<RbacAuthorizer> {
        &self.rbac
    }
}

impl Authorizer for Chain {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        if attributes.user.in_group(MASTERS_GROUP) {
            return Decision::Allow(String::new());
        }
        let mut reasons = Vec::new();
        let authorizers: [&dyn Authorizer; 2] = [&self.node, self.rbac.as_ref()];
        for authorizer in authorizers {
            match authorizer.authorize(attributes) {
                Decision::NoOpinion(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                decided => return decided,
            }
        }
        Decision::NoOpinion(reasons.join("\n"))
    }
}
