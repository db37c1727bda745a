//! The node authorizer: what a node agent (`system:node:<name>` in `system:nodes`) may read
//! and write, decided from a graph of the pods bound to each node and what they reference.
//! Not built yet (identities' part): it has no opinion, so RBAC decides.

use super::{Attributes, Authorizer, Decision};

/// The node authorizer.
#[derive(Debug, Default)]
pub(crate) struct NodeAuthorizer;

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, _attributes: &Attributes) -> Decision {
        Decision::NoOpinion(String::new())
    }
}
