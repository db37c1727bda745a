//! The RBAC authorizer (kube's `--authorization-mode=RBAC`): a request is allowed when a
//! RoleBinding in its namespace or a ClusterRoleBinding names the asker (as a user, a group it
//! is in, or its ServiceAccount) and the bound Role or ClusterRole has a rule allowing it.
//!
//! Decisions come from an in-memory [`Index`](index::Index) (`index.rs`), never the store: it
//! follows the four kinds' watch caches, applying their new events (a cheap revision check
//! first) when a decision is asked, so it is as current as the caches and changes one object
//! per event; a cache whose window it fell behind is loaded again whole. Rule matching is
//! `rules.rs`.

pub(crate) mod index;
pub(crate) mod rules;

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::PolicyRule;
use parking_lot::RwLock;
use setpoint_core::Revision;

use index::{Index, Kind};

use super::{Attributes, Authorizer, Decision};
use crate::auth::User;
use crate::watchcache::{EventType, WatchCache};

/// Most events applied per cache read.
const BATCH: usize = 1024;

/// The index and how far into each cache it has read.
#[derive(Default)]
struct State {
    index: Index,
    cursors: [Revision; 4],
}

/// The RBAC authorizer over the watch caches of the four RBAC kinds.
pub(crate) struct RbacAuthorizer {
    /// Roles, ClusterRoles, RoleBindings, ClusterRoleBindings: in [`KINDS`] order.
    caches: [Arc<WatchCache>; 4],
    state: RwLock<State>,
}

/// The kinds, in the order of [`RbacAuthorizer::caches`].
const KINDS: [Kind; 4] = [
    Kind::Role,
    Kind::ClusterRole,
    Kind::RoleBinding,
    Kind::ClusterRoleBinding,
];

/// The plural resource names of [`KINDS`].
pub(crate) const RESOURCES: [&str; 4] = [
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

impl RbacAuthorizer {
    /// An authorizer following `caches` (of roles, clusterroles, rolebindings and
    /// clusterrolebindings, in that order).
    pub(crate) fn new(caches: [Arc<WatchCache>; 4]) -> Self {
        RbacAuthorizer {
            caches,
            state: RwLock::new(State::default()),
        }
    }

    /// Brings the index up to the caches (no-op when no cache moved).
    fn refresh(&self) {
        let behind = {
            let state = self.state.read();
            self.caches
                .iter()
                .zip(state.cursors)
                .any(|(cache, cursor)| cache.revision() > cursor)
        };
        if !behind {
            return;
        }
        let mut state = self.state.write();
        let State { index, cursors } = &mut *state;
        for ((cache, kind), cursor) in self.caches.iter().zip(KINDS).zip(cursors.iter_mut()) {
            loop {
                match cache.events_after(*cursor, BATCH) {
                    Ok((events, reached)) => {
                        for event in &events {
                            let prev = event.prev.as_ref().map(|p| p.json.bytes());
                            let object = event.object.json.bytes();
                            match event.kind {
                                EventType::Deleted => index.apply(kind, None, Some(&object)),
                                _ => index.apply(kind, Some(&object), prev.as_deref()),
                            }
                            *cursor = event.revision;
                        }
                        if events.len() < BATCH {
                            *cursor = (*cursor).max(reached);
                            break;
                        }
                    }
                    Err(_) => {
                        // Fell behind the cache's window (or never read it): load it whole.
                        let (objects, revision) = cache.snapshot();
                        index.clear(kind);
                        for object in objects.values() {
                            index.apply(kind, Some(&object.json.bytes()), None);
                        }
                        *cursor = revision;
                        break;
                    }
                }
            }
        }
    }

    /// Every rule granted to `user` in `namespace` (`""`: by ClusterRoleBindings only), and
    /// the errors met (roles not found), for rules reviews and escalation checks.
    pub(crate) fn rules_for(&self, user: &User, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        self.refresh();
        self.state.read().index.rules_for(user, namespace)
    }
}

impl RbacAuthorizer {
    /// The rules of the ClusterRole `name` (`cluster`) or of the Role `name` in `namespace`, or
    /// kube's "not found" error.
    pub(crate) fn role_rules(
        &self,
        cluster: bool,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        self.refresh();
        self.state.read().index.role_rules(cluster, namespace, name)
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        self.refresh();
        self.state.read().index.authorize(attributes)
    }
}
