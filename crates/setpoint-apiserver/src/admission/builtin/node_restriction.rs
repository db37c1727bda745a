//! NodeRestriction (kube-apiserver's admission plugin of that name): what a node agent —
//! `system:node:<node>` in `system:nodes` — may change, beyond what the node authorizer
//! lets it ask. A node may:
//!
//! - create and update only its own Node, never setting or changing labels under
//!   `node-restriction.kubernetes.io/`, nor `kubernetes.io`/`k8s.io` labels other than the
//!   kubelet's own (`kubernetes.io/hostname`, `…/os`, `…/arch`, the instance type and
//!   topology labels, anything under `kubelet.kubernetes.io/` and `node.kubernetes.io/`), and
//!   never changing its taints (which would steer workloads to it);
//! - update the status of, and delete, only pods bound to it (`spec.nodeName`), without
//!   changing their labels through the status; it may not create pods (mirror pods are not
//!   supported);
//! - create only its own Lease in `kube-node-lease`;
//! - ask a token (`serviceaccounts/<sa>/token`) only bound to a pod bound to it;
//! - change only the PersistentVolumes of Setpoint's local-path volumes placed on it
//!   (annotation `setpoint.dev/local-path`), to remove their cleanup finalizer.
//!
//! Everyone else is not concerned. Refusals are `403 Forbidden` as kube's
//! (`nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`).

use serde_json::Value;
use setpoint_core::ApiError;

use crate::api::Served;
use crate::auth::User;
use crate::identities::node_of;
use crate::registry::store::Operation;
use crate::registry::ResourceDef;

/// The namespace of the nodes' Leases.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The annotation naming the node of a local-path volume.
const LOCAL_PATH_NODE: &str = "setpoint.dev/local-path";
/// The labels a kubelet sets on its own Node.
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
];
/// The label namespaces a kubelet may use freely (and their subdomains).
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// NodeRestriction for one request of a node.
pub(crate) struct NodeRestriction {
    node: String,
    served: std::sync::Arc<Served>,
    subresource: String,
    namespace: String,
}

/// NodeRestriction for a request of `user`, if `user` is a node and the resource is one it
/// restricts.
pub(crate) fn for_request(
    served: &std::sync::Arc<Served>,
    user: Option<&User>,
    def: &ResourceDef,
    subresource: &str,
    namespace: Option<&str>,
) -> Option<NodeRestriction> {
    let node = node_of(user?)?;
    let restricted = match def.gvk.group.as_str() {
        "" => matches!(
            def.plural.as_str(),
            "nodes" | "pods" | "serviceaccounts" | "persistentvolumes"
        ),
        "coordination.k8s.io" => def.plural == "leases",
        _ => false,
    };
    restricted.then(|| NodeRestriction {
        node: node.to_owned(),
        served: served.clone(),
        subresource: subresource.to_owned(),
        namespace: namespace.unwrap_or_default().to_owned(),
    })
}

impl NodeRestriction {
    /// Whether the node may make this write: `object` as it would be stored (`None` on a
    /// delete), `old` as it is.
    pub(crate) fn validate(
        &self,
        def: &ResourceDef,
        operation: Operation,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let node = self.node.as_str();
        let name = object
            .or(old)
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or_default();
        let refuse = |why: String| {
            Err(ApiError::forbidden_object(
                &def.group_resource(),
                name,
                &why,
            ))
        };
        if node.is_empty() {
            return refuse("unknown node".to_owned());
        }
        match (def.plural.as_str(), self.subresource.as_str()) {
            ("nodes", _) => {
                if name != node {
                    return refuse(format!("node {node:?} is not allowed to modify node {name:?}"));
                }
                let labels = |o: Option<&Value>| -> Vec<(String, String)> {
                    o.and_then(|o| o["metadata"]["labels"].as_object())
                        .map(|l| {
                            l.iter()
                                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let new = labels(object);
                let before = labels(old);
                let changed: Vec<&str> = match operation {
                    Operation::Create => new.iter().map(|(k, _)| k.as_str()).collect(),
                    Operation::Update => new
                        .iter()
                        .filter(|l| !before.contains(l))
                        .chain(before.iter().filter(|l| !new.iter().any(|(k, _)| *k == l.0)))
                        .map(|(k, _)| k.as_str())
                        .collect(),
                    Operation::Delete => Vec::new(),
                };
                let mut forbidden: Vec<&str> = changed.into_iter().filter(|l| forbidden_label(l)).collect();
                forbidden.sort_unstable();
                forbidden.dedup();
                if !forbidden.is_empty() {
                    let verb = if operation == Operation::Create { "set the following labels" } else { "modify labels" };
                    return refuse(format!("is not allowed to {verb}: {}", forbidden.join(", ")));
                }
                if operation == Operation::Update
                    && object.map(|o| &o["spec"]["taints"]) != old.map(|o| &o["spec"]["taints"])
                {
                    return refuse(format!("node {node:?} is not allowed to modify taints"));
                }
                Ok(())
            }
            ("pods", "") => match operation {
                Operation::Delete => {
                    if bound_node(old) != node {
                        return refuse(format!(
                            "node {node:?} can only delete pods with spec.nodeName set to itself"
                        ));
                    }
                    Ok(())
                }
                Operation::Create => refuse(format!(
                    "pod does not have \"kubernetes.io/config.mirror\" annotation, node {node:?} can only create mirror pods"
                )),
                Operation::Update => refuse(format!(
                    "unexpected operation \"UPDATE\", node {node:?} can only create and delete mirror pods"
                )),
            },
            ("pods", "status") => {
                if bound_node(old) != node {
                    return refuse(format!(
                        "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
                    ));
                }
                let labels = |o: Option<&Value>| o.map(|o| o["metadata"]["labels"].clone());
                if labels(object) != labels(old) {
                    return refuse(format!("node {node:?} cannot update labels through pod status"));
                }
                Ok(())
            }
            ("pods", _) => Ok(()),
            ("leases", _) => {
                if operation == Operation::Create
                    && (self.namespace != NODE_LEASE_NAMESPACE || name != node)
                {
                    return refuse("can only access node lease with the same name as the requesting node".to_owned());
                }
                Ok(())
            }
            ("serviceaccounts", "token") => self.token_request(object, &refuse),
            ("serviceaccounts", _) => Ok(()),
            ("persistentvolumes", _) => {
                let placed = old
                    .and_then(|o| o["metadata"]["annotations"][LOCAL_PATH_NODE].as_str())
                    .unwrap_or_default();
                if placed != node || operation != Operation::Update {
                    return refuse(format!(
                        "node {node:?} can only change the local-path volumes placed on it"
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A TokenRequest of a node must be bound to a pod bound to that node (name and uid).
    fn token_request(
        &self,
        request: Option<&Value>,
        refuse: &dyn Fn(String) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        let node = self.node.as_str();
        let bound = request.map(|r| &r["spec"]["boundObjectRef"]);
        let Some(bound) = bound.filter(|b| b.is_object()) else {
            return refuse("node requested token not bound to a pod".to_owned());
        };
        if bound["kind"] != "Pod" {
            return refuse(format!(
                "node requested token bound to a {}, not a pod",
                bound["kind"]
            ));
        }
        let pod_name = bound["name"].as_str().unwrap_or_default();
        let pod = self.served.store("", "v1", "pods").and_then(|store| {
            let key = store.def.key(Some(&self.namespace), pod_name);
            let (objects, _) = store.cache().snapshot();
            let object = objects.get(key.as_bytes())?.clone();
            serde_json::from_slice::<Value>(&object.json.bytes()).ok()
        });
        let Some(pod) = pod else {
            return refuse("node requested token bound to a pod that does not exist".to_owned());
        };
        if let Some(uid) = bound["uid"].as_str().filter(|u| !u.is_empty()) {
            if pod["metadata"]["uid"].as_str() != Some(uid) {
                return refuse(format!("the UID in the bound object reference ({uid}) does not match the UID in record"));
            }
        }
        if bound_node(Some(&pod)) != node {
            return refuse(
                "node requested token bound to a pod scheduled on a different node".to_owned(),
            );
        }
        Ok(())
    }
}

/// The node a pod is bound to (`""` if none).
fn bound_node(pod: Option<&Value>) -> &str {
    pod.and_then(|p| p["spec"]["nodeName"].as_str())
        .unwrap_or_default()
}

/// Whether a node may not set `label` on itself: anything under
/// `node-restriction.kubernetes.io/`, and `kubernetes.io`/`k8s.io` labels that are not the
/// kubelet's.
fn forbidden_label(label: &str) -> bool {
    let Some((namespace, _)) = label.split_once('/') else {
        return false;
    };
    let within = |domain: &str| namespace == domain || namespace.ends_with(&format!(".{domain}"));
    if within("node-restriction.kubernetes.io") {
        return true;
    }
    if !(within("kubernetes.io") || within("k8s.io")) {
        return false;
    }
    !(KUBELET_LABELS.contains(&label) || KUBELET_LABEL_NAMESPACES.iter().any(|ns| within(ns)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_label_should_allow_only_the_kubelets_own() {
        for allowed in [
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "node.kubernetes.io/anything",
            "x.kubelet.kubernetes.io/y",
            "setpoint.dev/pool",
            "plain",
        ] {
            assert!(!forbidden_label(allowed), "{allowed}");
        }
        for refused in [
            "node-restriction.kubernetes.io/trusted",
            "a.node-restriction.kubernetes.io/b",
            "node-role.kubernetes.io/control-plane",
            "kubernetes.io/role",
            "example.k8s.io/x",
        ] {
            assert!(forbidden_label(refused), "{refused}");
        }
    }
}
