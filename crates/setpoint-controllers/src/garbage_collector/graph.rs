//! The dependency graph: every watched object, by uid, with the owners its `ownerReferences`
//! name and the dependents that name it. Fed by the informers ([`Graph::observe`],
//! [`Graph::remove`]); read by the workers. It is a cache, never the authority: a worker
//! checks the live object before it deletes or changes anything.
//!
//! Every change answers with the work it makes ([`Work`]): which uids to check for deletion
//! and which owners to orphan.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The finalizer that makes the garbage collector delete an object's dependents before it.
pub(super) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer that makes the garbage collector orphan an object's dependents.
pub(super) const ORPHAN_FINALIZER: &str = "orphan";

/// An object's uid.
pub(super) type Uid = String;

/// Which object a node stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Identity {
    /// `group/version` (or `v1`).
    pub(super) api_version: String,
    pub(super) kind: String,
    /// The namespace; for a virtual node, the namespace of the dependent that named it (right
    /// only if the owner's kind is namespaced, which the live check resolves).
    pub(super) namespace: Option<String>,
    pub(super) name: String,
    pub(super) uid: Uid,
}

/// Whether an informer has shown us the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    /// Only known as some dependent's owner; it may not exist.
    Virtual,
    /// Seen in a list or watch event.
    Observed,
}

/// Where an object is in its deletion, as last observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deletion {
    /// No `deletionTimestamp`.
    Live,
    /// Has a `deletionTimestamp`, without the `foregroundDeletion` finalizer.
    BeingDeleted,
    /// Has a `deletionTimestamp` and the `foregroundDeletion` finalizer: waits for its blocking
    /// dependents to go.
    DeletingDependents,
}

/// What an informer says about an object, reduced to what the graph keeps.
#[derive(Debug, Clone)]
pub(super) struct Observation {
    pub(super) identity: Identity,
    pub(super) owners: Vec<OwnerReference>,
    pub(super) deletion: Deletion,
    /// Being deleted with the `orphan` finalizer.
    pub(super) orphaning: bool,
}

/// One object in the graph.
#[derive(Debug, Clone)]
struct Node {
    identity: Identity,
    presence: Presence,
    deletion: Deletion,
    /// Its owner references as last observed; empty for a virtual node.
    owners: Vec<OwnerReference>,
    /// Uids of the observed nodes whose `owners` name this one. Each is in the graph.
    dependents: BTreeSet<Uid>,
}

/// What a change to the graph asks the workers to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Work {
    /// Check these for deletion (dependents of a gone owner, unverified owners, owners waiting
    /// for their dependents).
    pub(super) attempt_to_delete: Vec<Uid>,
    /// Orphan the dependents of these owners, then drop their `orphan` finalizer.
    pub(super) attempt_to_orphan: Vec<Uid>,
}

/// A node as a worker sees it: a copy, so no lock is held across I/O.
#[derive(Debug, Clone)]
pub(super) struct NodeView {
    pub(super) identity: Identity,
    pub(super) presence: Presence,
    pub(super) deletion: Deletion,
    /// Every dependent's identity.
    pub(super) dependents: Vec<Identity>,
    /// The dependents whose reference to this node has `blockOwnerDeletion: true`, with
    /// whether each is itself being deleted.
    pub(super) blocking: Vec<(Identity, Deletion)>,
    /// Whether some dependent is itself deleting its dependents (a possible cycle).
    pub(super) dependent_deleting_dependents: bool,
}

/// The graph.
///
/// Invariants: every uid in a node's `dependents` is a node of the graph whose `owners` name
/// that node; every observed node's owner that is in the graph lists it as a dependent; a
/// virtual node is only kept while it has dependents.
#[derive(Debug, Default)]
pub(super) struct Graph {
    nodes: HashMap<Uid, Node>,
}

impl Graph {
    /// Records the object as observed now.
    pub(super) fn observe(&mut self, o: Observation) -> Work {
        let mut work = Work::default();
        let uid = o.identity.uid.clone();
        let previous = self
            .nodes
            .get(&uid)
            .map(|n| (n.owners.clone(), n.deletion, n.presence));
        let (old_owners, old_deletion, first_seen) = match previous {
            Some((owners, deletion, presence)) => {
                (owners, Some(deletion), presence == Presence::Virtual)
            }
            None => (Vec::new(), None, true),
        };
        // Owners no longer named, or whose reference changed: unlink; an owner waiting for its
        // dependents may now be free.
        for old in &old_owners {
            let same = o.owners.iter().any(|r| r == old);
            if same {
                continue;
            }
            if let Some(owner) = self.nodes.get_mut(&old.uid) {
                if owner.deletion == Deletion::DeletingDependents {
                    work.attempt_to_delete.push(old.uid.clone());
                }
                if !o.owners.iter().any(|r| r.uid == old.uid) {
                    owner.dependents.remove(&uid);
                }
            }
            self.prune_virtual(&old.uid);
        }
        let node = self.nodes.entry(uid.clone()).or_insert_with(|| Node {
            identity: o.identity.clone(),
            presence: Presence::Observed,
            deletion: Deletion::Live,
            owners: Vec::new(),
            dependents: BTreeSet::new(),
        });
        node.identity = o.identity.clone();
        node.presence = Presence::Observed;
        node.deletion = o.deletion;
        node.owners = o.owners.clone();
        // Link every named owner, creating a virtual node (to be verified) for one not seen.
        for r in &o.owners {
            let owner = self.nodes.entry(r.uid.clone()).or_insert_with(|| {
                work.attempt_to_delete.push(r.uid.clone());
                Node {
                    identity: Identity {
                        api_version: r.api_version.clone(),
                        kind: r.kind.clone(),
                        namespace: o.identity.namespace.clone(),
                        name: r.name.clone(),
                        uid: r.uid.clone(),
                    },
                    presence: Presence::Virtual,
                    deletion: Deletion::Live,
                    owners: Vec::new(),
                    dependents: BTreeSet::new(),
                }
            });
            owner.dependents.insert(uid.clone());
            // A namespaced owner only owns objects in its namespace: a reference from
            // elsewhere is checked (and found dangling) by the workers.
            if owner.presence == Presence::Observed
                && owner.identity.namespace.is_some()
                && owner.identity.namespace != o.identity.namespace
            {
                work.attempt_to_delete.push(uid.clone());
            }
        }
        // Likewise once the owner itself is seen, for dependents that named it from elsewhere.
        if first_seen && o.identity.namespace.is_some() {
            let node = &self.nodes[&uid];
            for d in &node.dependents {
                if self
                    .nodes
                    .get(d)
                    .is_some_and(|d| d.identity.namespace != o.identity.namespace)
                {
                    work.attempt_to_delete.push(d.clone());
                }
            }
        }
        if o.deletion == Deletion::DeletingDependents {
            if old_deletion != Some(Deletion::DeletingDependents) {
                work.attempt_to_delete
                    .extend(self.nodes[&uid].dependents.iter().cloned());
            }
            work.attempt_to_delete.push(uid.clone());
        }
        if o.orphaning {
            work.attempt_to_orphan.push(uid);
        }
        work
    }

    /// Forgets the object (deleted, or found gone by a worker): its dependents are checked,
    /// and its owners that wait for their dependents are looked at again.
    pub(super) fn remove(&mut self, uid: &str) -> Work {
        let mut work = Work::default();
        let Some(node) = self.nodes.remove(uid) else {
            return work;
        };
        for r in &node.owners {
            if let Some(owner) = self.nodes.get_mut(&r.uid) {
                owner.dependents.remove(uid);
                if owner.deletion == Deletion::DeletingDependents {
                    work.attempt_to_delete.push(r.uid.clone());
                }
            }
            self.prune_virtual(&r.uid);
        }
        work.attempt_to_delete.extend(node.dependents);
        work
    }

    /// Forgets the node if it is still virtual (an owner found not to exist).
    pub(super) fn remove_virtual(&mut self, uid: &str) -> Work {
        match self.nodes.get(uid) {
            Some(n) if n.presence == Presence::Virtual => self.remove(uid),
            _ => Work::default(),
        }
    }

    /// A copy of the node.
    pub(super) fn view(&self, uid: &str) -> Option<NodeView> {
        let node = self.nodes.get(uid)?;
        let mut view = NodeView {
            identity: node.identity.clone(),
            presence: node.presence,
            deletion: node.deletion,
            dependents: Vec::new(),
            blocking: Vec::new(),
            dependent_deleting_dependents: false,
        };
        for d in node.dependents.iter().filter_map(|d| self.nodes.get(d)) {
            view.dependents.push(d.identity.clone());
            if d.deletion == Deletion::DeletingDependents {
                view.dependent_deleting_dependents = true;
            }
            let blocks = d
                .owners
                .iter()
                .any(|r| r.uid == uid && r.block_owner_deletion == Some(true));
            if blocks {
                view.blocking.push((d.identity.clone(), d.deletion));
            }
        }
        Some(view)
    }

    /// How many nodes the graph holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Drops a virtual node nobody names any more.
    fn prune_virtual(&mut self, uid: &str) {
        if self
            .nodes
            .get(uid)
            .is_some_and(|n| n.presence == Presence::Virtual && n.dependents.is_empty())
        {
            self.nodes.remove(uid);
        }
    }

    /// Panics if an invariant does not hold.
    #[cfg(test)]
    fn check_invariants(&self) {
        for (uid, node) in &self.nodes {
            for d in &node.dependents {
                let dep = self.nodes.get(d).expect("dependent in graph");
                assert!(dep.owners.iter().any(|r| &r.uid == uid), "{d} names {uid}");
            }
            for r in &node.owners {
                if let Some(owner) = self.nodes.get(&r.uid) {
                    assert!(owner.dependents.contains(uid), "{} lists {uid}", r.uid);
                }
            }
            if node.presence == Presence::Virtual {
                assert!(!node.dependents.is_empty(), "virtual {uid} has dependents");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(uid: &str) -> Identity {
        Identity {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: format!("cm-{uid}"),
            uid: uid.into(),
        }
    }

    fn owner_ref(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: format!("cm-{uid}"),
            uid: uid.into(),
            block_owner_deletion: block.then_some(true),
            controller: None,
        }
    }

    fn seen(uid: &str, owners: Vec<OwnerReference>, deletion: Deletion) -> Observation {
        Observation {
            identity: identity(uid),
            owners,
            deletion,
            orphaning: false,
        }
    }

    #[test]
    fn graph_should_create_and_verify_virtual_owner_for_unseen_owner() {
        let mut g = Graph::default();
        let work = g.observe(seen("d", vec![owner_ref("o", false)], Deletion::Live));
        assert_eq!(work.attempt_to_delete, vec!["o".to_string()]);
        let owner = g.view("o").expect("virtual owner");
        assert_eq!(owner.presence, Presence::Virtual);
        assert_eq!(owner.dependents.len(), 1);
        g.check_invariants();
        // Seeing the owner makes it real; it is not verified again.
        let work = g.observe(seen("o", vec![], Deletion::Live));
        assert!(work.attempt_to_delete.is_empty());
        assert_eq!(g.view("o").expect("owner").presence, Presence::Observed);
        g.check_invariants();
    }

    #[test]
    fn graph_should_queue_dependents_when_owner_removed() {
        let mut g = Graph::default();
        g.observe(seen("o", vec![], Deletion::Live));
        g.observe(seen("a", vec![owner_ref("o", false)], Deletion::Live));
        g.observe(seen("b", vec![owner_ref("o", false)], Deletion::Live));
        let work = g.remove("o");
        assert_eq!(
            work.attempt_to_delete,
            vec!["a".to_string(), "b".to_string()]
        );
        g.check_invariants();
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn graph_should_queue_dependents_and_owner_when_foreground_deletion_starts() {
        let mut g = Graph::default();
        g.observe(seen("o", vec![], Deletion::Live));
        g.observe(seen("a", vec![owner_ref("o", true)], Deletion::Live));
        let work = g.observe(seen("o", vec![], Deletion::DeletingDependents));
        assert_eq!(
            work.attempt_to_delete,
            vec!["a".to_string(), "o".to_string()]
        );
        let view = g.view("o").expect("owner");
        assert_eq!(view.blocking.len(), 1);
        // The blocking dependent going away sends the owner back to the workers.
        let work = g.remove("a");
        assert_eq!(work.attempt_to_delete, vec!["o".to_string()]);
        assert!(g.view("o").expect("owner").blocking.is_empty());
        g.check_invariants();
    }

    #[test]
    fn graph_should_unlink_dropped_owner_reference_and_prune_virtual_owner() {
        let mut g = Graph::default();
        g.observe(seen("d", vec![owner_ref("o", false)], Deletion::Live));
        assert_eq!(g.len(), 2);
        g.observe(seen("d", vec![], Deletion::Live));
        assert_eq!(g.len(), 1, "the virtual owner nobody names is dropped");
        g.check_invariants();
    }

    #[test]
    fn graph_should_requeue_waiting_owner_when_reference_stops_blocking() {
        let mut g = Graph::default();
        g.observe(seen("o", vec![], Deletion::DeletingDependents));
        g.observe(seen("a", vec![owner_ref("o", true)], Deletion::Live));
        let work = g.observe(seen("a", vec![owner_ref("o", false)], Deletion::Live));
        assert_eq!(work.attempt_to_delete, vec!["o".to_string()]);
        assert!(g.view("o").expect("owner").blocking.is_empty());
        assert_eq!(g.view("o").expect("owner").dependents.len(), 1);
        g.check_invariants();
    }

    #[test]
    fn graph_should_remove_virtual_node_only_while_virtual() {
        let mut g = Graph::default();
        g.observe(seen("d", vec![owner_ref("o", false)], Deletion::Live));
        g.observe(seen("o", vec![], Deletion::Live));
        assert_eq!(g.remove_virtual("o"), Work::default());
        assert!(g.view("o").is_some());
        let mut g = Graph::default();
        g.observe(seen("d", vec![owner_ref("o", false)], Deletion::Live));
        let work = g.remove_virtual("o");
        assert_eq!(work.attempt_to_delete, vec!["d".to_string()]);
        assert!(g.view("o").is_none());
        g.check_invariants();
    }

    #[test]
    fn graph_should_queue_dependent_naming_owner_in_another_namespace() {
        let mut g = Graph::default();
        g.observe(seen("o", vec![], Deletion::Live));
        let mut elsewhere = seen("d", vec![owner_ref("o", false)], Deletion::Live);
        elsewhere.identity.namespace = Some("other".into());
        let work = g.observe(elsewhere.clone());
        assert_eq!(work.attempt_to_delete, vec!["d".to_string()]);
        // The same when the dependent is seen first and the owner after.
        let mut g = Graph::default();
        g.observe(elsewhere);
        let work = g.observe(seen("o", vec![], Deletion::Live));
        assert_eq!(work.attempt_to_delete, vec!["d".to_string()]);
        g.check_invariants();
    }

    #[test]
    fn graph_should_queue_owner_for_orphaning() {
        let mut g = Graph::default();
        let mut o = seen("o", vec![], Deletion::BeingDeleted);
        o.orphaning = true;
        let work = g.observe(o);
        assert_eq!(work.attempt_to_orphan, vec!["o".to_string()]);
    }
}
