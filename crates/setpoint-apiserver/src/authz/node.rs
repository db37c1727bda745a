//! The node authorizer (kube-apiserver's `--authorization-mode=Node`): what a node agent —
//! `system:node:<node>` in `system:nodes` — may read and write. Anyone else gets no opinion
//! (RBAC decides).
//!
//! - Secrets and ConfigMaps (`get`, `list`, `watch` of one named object), PersistentVolumeClaims
//!   and PersistentVolumes (`get`), a ServiceAccount's token (`create serviceaccounts/token`):
//!   only those a pod bound to the node references (`node/graph.rs`, fed by the pods' and
//!   claims' watch caches, brought up to date on each decision as RBAC's index is).
//! - A claim's status (`update`/`patch`): only such claims.
//! - Its Lease: `kube-node-lease/<node>` (any name on create; NodeRestriction checks it).
//! - Nodes, pods, `pods/status`, `pods/eviction`, events, CSRs and the reads the agent's
//!   Service proxy and DNS need: allowed to every node by static rules (kube's `system:node`
//!   rules and `system:node-proxier`'s reads, since our agent is also the proxy);
//!   NodeRestriction admission (`admission/builtin/node_restriction.rs`) narrows the writes to
//!   the node's own Node and the pods bound to it.
//! - PersistentVolumes `list`/`watch`/`update`/`patch`: Setpoint's local-path volumes, whose
//!   directory the node of the volume deletes before removing the volume's finalizer
//!   (NodeRestriction: only volumes its `setpoint.dev/local-path` annotation gives this node).
//!
//! Not as kube 1.33: our authorization attributes carry no field selectors, so listing pods
//! and nodes is not narrowed to `spec.nodeName=<node>` / the node's own name (kube's
//! `AuthorizeNodeWithSelectors`, beta since 1.32, does); reads of one Secret or ConfigMap
//! by `list`/`watch` need the object's name in the request. ResourceClaims,
//! VolumeAttachments, CSINodes and ResourceSlices are not served.

mod graph;
mod refs;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use parking_lot::RwLock;
use setpoint_core::Revision;

use super::{Attributes, Authorizer, Decision};
use crate::identities::node_of;
use crate::watchcache::{CachedObject, EventType, WatchCache};
use graph::Graph;
use refs::{pod_refs, RefKind};

/// Most events applied per cache read.
const BATCH: usize = 1024;

/// The namespace of the nodes' Leases.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Rules every node has, as `(verbs, group, resources)`; a resource with a subresource is
/// written `pods/status`.
pub(crate) const NODE_RULES: &[(&[&str], &str, &[&str])] = &[
    // Checking API access (non-mutating creates).
    (&["create"], "authentication.k8s.io", &["tokenreviews"]),
    (
        &["create"],
        "authorization.k8s.io",
        &["subjectaccessreviews", "localsubjectaccessreviews"],
    ),
    // Services for the pods' environment; with EndpointSlices and Endpoints for the proxy
    // and DNS (kube's `system:node-proxier`).
    (&["get", "list", "watch"], "", &["services", "endpoints"]),
    (
        &["get", "list", "watch"],
        "discovery.k8s.io",
        &["endpointslices"],
    ),
    // Registering and reporting on its Node (NodeRestriction: its own).
    (
        &["create", "get", "list", "watch", "update", "patch"],
        "",
        &["nodes"],
    ),
    (&["update", "patch"], "", &["nodes/status"]),
    (&["create", "update", "patch"], "", &["events"]),
    (&["create", "update", "patch"], "events.k8s.io", &["events"]),
    // Its pods (NodeRestriction: only those bound to it; no mirror pods).
    (&["get", "list", "watch", "create", "delete"], "", &["pods"]),
    (&["update", "patch"], "", &["pods/status"]),
    (&["create"], "", &["pods/eviction"]),
    // Its client certificate (CSR).
    (
        &["create", "get", "list", "watch"],
        "certificates.k8s.io",
        &["certificatesigningrequests"],
    ),
    // Runtime classes and storage classes its pods name.
    (
        &["get", "list", "watch"],
        "node.k8s.io",
        &["runtimeclasses"],
    ),
    (
        &["get", "list", "watch"],
        "storage.k8s.io",
        &["storageclasses"],
    ),
];

/// The graph and how far into each cache it has read.
#[derive(Default)]
struct State {
    graph: Graph,
    /// Pods, claims.
    cursors: [Revision; 2],
}

/// The node authorizer over the watch caches of pods and PersistentVolumeClaims.
pub(crate) struct NodeAuthorizer {
    /// Pods, claims; none in an authorizer built without them (every graph question: no).
    caches: Option<[Arc<WatchCache>; 2]>,
    state: RwLock<State>,
}

impl Default for NodeAuthorizer {
    fn default() -> Self {
        NodeAuthorizer {
            caches: None,
            state: RwLock::new(State::default()),
        }
    }
}

impl std::fmt::Debug for NodeAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeAuthorizer").finish_non_exhaustive()
    }
}

impl NodeAuthorizer {
    /// An authorizer following the watch caches of pods and persistentvolumeclaims.
    pub(crate) fn new(pods: Arc<WatchCache>, claims: Arc<WatchCache>) -> Self {
        NodeAuthorizer {
            caches: Some([pods, claims]),
            state: RwLock::new(State::default()),
        }
    }

    /// Brings the graph up to the caches (no-op when neither moved).
    fn refresh(&self) {
        let Some(caches) = &self.caches else { return };
        let behind = {
            let state = self.state.read();
            caches
                .iter()
                .zip(state.cursors)
                .any(|(cache, cursor)| cache.revision() > cursor)
        };
        if !behind {
            return;
        }
        let mut state = self.state.write();
        let State { graph, cursors } = &mut *state;
        for (which, (cache, cursor)) in caches.iter().zip(cursors.iter_mut()).enumerate() {
            let pods = which == 0;
            loop {
                match cache.events_after(*cursor, BATCH) {
                    Ok((events, reached)) => {
                        for event in &events {
                            let deleted = event.kind == EventType::Deleted;
                            apply(graph, pods, &event.object, deleted);
                            *cursor = event.revision;
                        }
                        if events.len() < BATCH {
                            *cursor = (*cursor).max(reached);
                            break;
                        }
                    }
                    Err(_) => {
                        // Behind the cache's window (or never read): load it whole.
                        let (objects, revision) = cache.snapshot();
                        if pods {
                            graph.clear_pods();
                        } else {
                            graph.clear_claims();
                        }
                        for object in objects.values() {
                            apply(graph, pods, object, false);
                        }
                        *cursor = revision;
                        break;
                    }
                }
            }
        }
    }

    /// Runs `decide` on the graph, brought up to date.
    fn with_graph<T>(&self, decide: impl FnOnce(&Graph) -> T) -> T {
        self.refresh();
        decide(&self.state.read().graph)
    }
}

/// Applies one pod or claim (deleted or as it is now) to the graph.
fn apply(graph: &mut Graph, pods: bool, object: &CachedObject, deleted: bool) {
    if pods {
        let Ok(pod) = serde_json::from_slice::<Pod>(&object.json.bytes()) else {
            return;
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let bound = if deleted {
            None
        } else {
            let (node, refs) = pod_refs(&pod);
            node.map(|node| (node, refs))
        };
        graph.set_pod(namespace, &name, bound);
    } else {
        let Ok(claim) = serde_json::from_slice::<PersistentVolumeClaim>(&object.json.bytes())
        else {
            return;
        };
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let volume = if deleted {
            None
        } else {
            claim.spec.and_then(|s| s.volume_name)
        };
        graph.set_claim(namespace, &name, volume);
    }
}

/// No opinion, for `reason`.
fn no(reason: impl Into<String>) -> Decision {
    Decision::NoOpinion(reason.into())
}

fn allow() -> Decision {
    Decision::Allow(String::new())
}

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, a: &Attributes) -> Decision {
        let Some(node) = node_of(&a.user) else {
            return no("");
        };
        if node.is_empty() {
            return no(format!("unknown node for user {:?}", a.user.name));
        }
        if a.resource_request {
            let verb = a.verb.as_str();
            match (a.api_group.as_str(), a.resource.as_str()) {
                ("", "secrets") => return self.read_referenced(node, RefKind::Secret, a),
                ("", "configmaps") => return self.read_referenced(node, RefKind::ConfigMap, a),
                ("", "persistentvolumeclaims") if a.subresource == "status" => {
                    if !matches!(verb, "update" | "patch") {
                        return no("can only get/update/patch this type");
                    }
                    return self.related(node, RefKind::Claim, a);
                }
                ("", "persistentvolumeclaims") => {
                    if verb != "get" || !a.subresource.is_empty() {
                        return no("can only get individual resources of this type");
                    }
                    return self.related(node, RefKind::Claim, a);
                }
                ("", "persistentvolumes") => return self.volume(node, a),
                ("", "serviceaccounts") => {
                    if verb != "create" || a.name.is_empty() || a.subresource != "token" {
                        return no("can only create tokens for individual service accounts");
                    }
                    return self.related(node, RefKind::ServiceAccount, a);
                }
                ("coordination.k8s.io", "leases") => return lease(node, a),
                _ => {}
            }
        }
        if static_rules_allow(a) {
            return allow();
        }
        no("")
    }
}

impl NodeAuthorizer {
    /// `get`, `list` or `watch` of one Secret or ConfigMap a pod of `node` references.
    fn read_referenced(&self, node: &str, kind: RefKind, a: &Attributes) -> Decision {
        if !matches!(a.verb.as_str(), "get" | "list" | "watch") {
            return no("can only read resources of this type");
        }
        if !a.subresource.is_empty() {
            return no("cannot read subresource");
        }
        if a.namespace.is_empty() {
            return no("can only read namespaced object of this type");
        }
        self.related(node, kind, a)
    }

    /// Whether a pod of `node` references the object `a` names.
    fn related(&self, node: &str, kind: RefKind, a: &Attributes) -> Decision {
        if a.name.is_empty() {
            return no("No Object name found");
        }
        if self.with_graph(|g| g.references(node, kind, &a.namespace, &a.name)) {
            allow()
        } else {
            no(format!(
                "no relationship found between node '{node}' and this object"
            ))
        }
    }

    /// PersistentVolumes: reading and changing them for local-path cleanup (NodeRestriction
    /// limits the changes). Kube lets a node `get` only the volumes its pods use; here `get`
    /// of any is allowed, since `list` and `watch` of all are (the agent's local-path
    /// informer), and the cleanup reads a volume after its last pod is gone.
    fn volume(&self, _node: &str, a: &Attributes) -> Decision {
        match a.verb.as_str() {
            "get" | "list" | "watch" | "update" | "patch" if a.subresource.is_empty() => allow(),
            _ => no("can only get individual resources of this type"),
        }
    }
}

/// The node's own Lease in `kube-node-lease`.
fn lease(node: &str, a: &Attributes) -> Decision {
    if !matches!(
        a.verb.as_str(),
        "get" | "create" | "update" | "patch" | "delete"
    ) {
        return no("can only get, create, update, patch, or delete a node lease");
    }
    if a.namespace != NODE_LEASE_NAMESPACE {
        return no(format!(
            "can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"
        ));
    }
    if a.verb != "create" && a.name != node {
        return no("can only access node lease with the same name as the requesting node");
    }
    allow()
}

/// Whether [`NODE_RULES`] allow the request.
fn static_rules_allow(a: &Attributes) -> bool {
    if !a.resource_request {
        return false;
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    NODE_RULES.iter().any(|(verbs, group, resources)| {
        *group == a.api_group
            && verbs.contains(&a.verb.as_str())
            && resources.contains(&resource.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identities::{controller_user, node_user};

    fn attrs(
        user: &crate::auth::User,
        verb: &str,
        group: &str,
        resource: &str,
        ns: &str,
        name: &str,
    ) -> Attributes {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Attributes {
            user: user.clone(),
            verb: verb.to_owned(),
            resource_request: true,
            namespace: ns.to_owned(),
            api_group: group.to_owned(),
            api_version: "v1".to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            name: name.to_owned(),
            path: String::new(),
        }
    }

    fn allowed(d: Decision) -> bool {
        matches!(d, Decision::Allow(_))
    }

    #[test]
    fn node_authorizer_should_decide_by_the_graph_and_the_static_rules() {
        let authorizer = NodeAuthorizer::default();
        {
            let mut state = authorizer.state.write();
            state.graph.set_pod(
                "ns",
                "p",
                Some((
                    "n1".into(),
                    vec![
                        (RefKind::Secret, "s".into()),
                        (RefKind::Claim, "c".into()),
                        (RefKind::ServiceAccount, "sa".into()),
                    ],
                )),
            );
            state.graph.set_claim("ns", "c", Some("pv".into()));
        }
        let n1 = node_user("n1");
        let n2 = node_user("n2");
        let a = |u, verb, res, ns, name| authorizer.authorize(&attrs(u, verb, "", res, ns, name));
        assert!(allowed(a(&n1, "get", "secrets", "ns", "s")));
        assert!(allowed(a(&n1, "watch", "secrets", "ns", "s")));
        assert!(!allowed(a(&n2, "get", "secrets", "ns", "s")));
        assert!(!allowed(a(&n1, "get", "secrets", "ns", "other")));
        assert!(
            !allowed(a(&n1, "list", "secrets", "ns", "")),
            "a list of every secret"
        );
        assert!(!allowed(a(&n1, "update", "secrets", "ns", "s")));
        assert!(allowed(a(&n1, "get", "persistentvolumeclaims", "ns", "c")));
        assert!(allowed(a(&n1, "get", "persistentvolumes", "", "pv")));
        // Any volume: list is allowed anyway (local-path cleanup).
        assert!(allowed(a(&n2, "get", "persistentvolumes", "", "pv")));
        assert!(allowed(a(
            &n1,
            "create",
            "serviceaccounts/token",
            "ns",
            "sa"
        )));
        assert!(!allowed(a(
            &n2,
            "create",
            "serviceaccounts/token",
            "ns",
            "sa"
        )));
        assert!(!allowed(a(&n1, "get", "serviceaccounts", "ns", "sa")));
        assert!(
            allowed(a(&n2, "patch", "pods/status", "ns", "p")),
            "NodeRestriction's to refuse"
        );
        assert!(allowed(a(&n2, "update", "nodes/status", "", "n2")));
        assert!(!allowed(a(&n1, "delete", "nodes", "", "n1")));
        let lease = |u, verb, ns, name| {
            authorizer.authorize(&attrs(u, verb, "coordination.k8s.io", "leases", ns, name))
        };
        assert!(allowed(lease(&n1, "update", "kube-node-lease", "n1")));
        assert!(!allowed(lease(&n1, "update", "kube-node-lease", "n2")));
        assert!(!allowed(lease(&n1, "update", "kube-system", "n1")));
        // Not a node: no opinion, whatever it asks.
        let controller = controller_user("deployment-controller");
        assert_eq!(
            a(&controller, "get", "secrets", "ns", "s"),
            Decision::NoOpinion(String::new())
        );
    }
}
