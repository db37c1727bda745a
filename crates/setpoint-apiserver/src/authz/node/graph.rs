//! The node authorizer's graph: which node each bound pod runs on, what each pod references
//! (`refs.rs`), and which volume each claim is bound to. A node is related to an object when a
//! pod bound to it references the object, and to a PersistentVolume when such a pod
//! references a claim bound to it (kube's `pv → pvc → pod → node` path).
//!
//! Invariant: `referenced[(kind, ns, name)][node]` is the number of entries of `pods` in `ns`
//! on `node` whose refs hold `(kind, name)`; no count is zero (emptied entries are removed).

use std::collections::{BTreeSet, HashMap};

use super::refs::{Ref, RefKind};

/// `(namespace, name)`.
type Key = (String, String);

/// A pod bound to a node, and what it references.
#[derive(Debug)]
struct PodEdges {
    node: String,
    refs: Vec<Ref>,
}

/// The relationships the node authorizer decides by.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    /// Every pod bound to a node.
    pods: HashMap<Key, PodEdges>,
    /// For each referenced object (kind, namespace, name): how many pods of each node name it.
    referenced: HashMap<(RefKind, String, String), HashMap<String, usize>>,
    /// Each claim's volume (`spec.volumeName`), for claims that name one.
    claim_volume: HashMap<Key, String>,
    /// The claims naming each volume.
    volume_claims: HashMap<String, BTreeSet<Key>>,
}

impl Graph {
    /// Records the pod `namespace/name` as bound to `bound.0` referencing `bound.1`, or
    /// forgets it (`None`: deleted, or not bound).
    pub(crate) fn set_pod(
        &mut self,
        namespace: &str,
        name: &str,
        bound: Option<(String, Vec<Ref>)>,
    ) {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(old) = self.pods.remove(&key) {
            for (kind, object) in &old.refs {
                let entry = (*kind, namespace.to_owned(), object.clone());
                if let Some(nodes) = self.referenced.get_mut(&entry) {
                    if let Some(count) = nodes.get_mut(&old.node) {
                        *count -= 1;
                        if *count == 0 {
                            nodes.remove(&old.node);
                        }
                    }
                    if nodes.is_empty() {
                        self.referenced.remove(&entry);
                    }
                }
            }
        }
        let Some((node, refs)) = bound else { return };
        for (kind, object) in &refs {
            *self
                .referenced
                .entry((*kind, namespace.to_owned(), object.clone()))
                .or_default()
                .entry(node.clone())
                .or_default() += 1;
        }
        self.pods.insert(key, PodEdges { node, refs });
    }

    /// Records the claim `namespace/name` as naming `volume`, or forgets it.
    pub(crate) fn set_claim(&mut self, namespace: &str, name: &str, volume: Option<String>) {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(old) = self.claim_volume.remove(&key) {
            if let Some(claims) = self.volume_claims.get_mut(&old) {
                claims.remove(&key);
                if claims.is_empty() {
                    self.volume_claims.remove(&old);
                }
            }
        }
        if let Some(volume) = volume.filter(|v| !v.is_empty()) {
            self.volume_claims
                .entry(volume.clone())
                .or_default()
                .insert(key.clone());
            self.claim_volume.insert(key, volume);
        }
    }

    /// Forgets every pod.
    pub(crate) fn clear_pods(&mut self) {
        self.pods.clear();
        self.referenced.clear();
    }

    /// Forgets every claim.
    pub(crate) fn clear_claims(&mut self) {
        self.claim_volume.clear();
        self.volume_claims.clear();
    }

    /// Whether a pod bound to `node` references `kind` `namespace/name`.
    pub(crate) fn references(
        &self,
        node: &str,
        kind: RefKind,
        namespace: &str,
        name: &str,
    ) -> bool {
        self.referenced
            .get(&(kind, namespace.to_owned(), name.to_owned()))
            .is_some_and(|nodes| nodes.contains_key(node))
    }

    /// Whether the pod `namespace/name` is bound to `node`.
    #[cfg(test)]
    pub(crate) fn has_pod(&self, node: &str, namespace: &str, name: &str) -> bool {
        self.pods
            .get(&(namespace.to_owned(), name.to_owned()))
            .is_some_and(|pod| pod.node == node)
    }

    /// Whether a pod bound to `node` uses the PersistentVolume `volume` (through a claim
    /// bound to it). (The authorizer lets nodes read every volume: see `NodeAuthorizer`.)
    #[cfg(test)]
    pub(crate) fn uses_volume(&self, node: &str, volume: &str) -> bool {
        self.volume_claims.get(volume).is_some_and(|claims| {
            claims
                .iter()
                .any(|(ns, claim)| self.references(node, RefKind::Claim, ns, claim))
        })
    }

    /// Checks the invariant on the counts (tests).
    #[cfg(test)]
    fn check_invariants(&self) {
        let mut expected: HashMap<(RefKind, String, String), HashMap<String, usize>> =
            HashMap::new();
        for ((ns, _), pod) in &self.pods {
            for (kind, name) in &pod.refs {
                *expected
                    .entry((*kind, ns.clone(), name.clone()))
                    .or_default()
                    .entry(pod.node.clone())
                    .or_default() += 1;
            }
        }
        assert_eq!(expected, self.referenced);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(names: &[(RefKind, &str)]) -> Vec<Ref> {
        names.iter().map(|(k, n)| (*k, (*n).to_owned())).collect()
    }

    #[test]
    fn graph_should_follow_pods_moving_and_going() {
        let mut g = Graph::default();
        g.set_pod(
            "ns",
            "a",
            Some((
                "n1".into(),
                refs(&[(RefKind::Secret, "s"), (RefKind::Claim, "c")]),
            )),
        );
        g.set_pod(
            "ns",
            "b",
            Some(("n1".into(), refs(&[(RefKind::Secret, "s")]))),
        );
        g.set_claim("ns", "c", Some("pv1".into()));
        g.check_invariants();
        assert!(g.references("n1", RefKind::Secret, "ns", "s"));
        assert!(!g.references("n2", RefKind::Secret, "ns", "s"));
        assert!(!g.references("n1", RefKind::Secret, "other", "s"));
        assert!(g.uses_volume("n1", "pv1") && !g.uses_volume("n2", "pv1"));
        assert!(g.has_pod("n1", "ns", "a") && !g.has_pod("n2", "ns", "a"));

        g.set_pod("ns", "a", None);
        g.check_invariants();
        assert!(
            g.references("n1", RefKind::Secret, "ns", "s"),
            "b still names it"
        );
        assert!(!g.uses_volume("n1", "pv1"));
        g.set_pod(
            "ns",
            "b",
            Some(("n2".into(), refs(&[(RefKind::Secret, "s")]))),
        );
        g.check_invariants();
        assert!(!g.references("n1", RefKind::Secret, "ns", "s"));
        assert!(g.references("n2", RefKind::Secret, "ns", "s"));
        g.set_pod("ns", "b", None);
        g.set_claim("ns", "c", None);
        g.check_invariants();
        assert!(g.referenced.is_empty() && g.volume_claims.is_empty());
    }
}
